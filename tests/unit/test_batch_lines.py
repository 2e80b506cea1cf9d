"""A batch's output file read back as untrusted input (issue 33): every readable line kept,
each unreadable one a single clear problem, never a crash."""

from __future__ import annotations

import orjson

from gen_tui.backends.clients.batch import BatchLines, batch_state, read_lines


def answer(custom_id: str, tokens: int = 5) -> bytes:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "cost": 0.5},
    }
    line = {
        "id": "r",
        "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": "q", "body": body},
        "error": None,
    }
    return orjson.dumps(line)


def test_good_lines_are_answers_by_custom_id() -> None:
    data = answer("a") + b"\n" + answer("b", 9) + b"\n"
    lines = read_lines(data, {"a", "b", "c"}, "out", 0.0, BatchLines())
    assert set(lines.answers) == {"a", "b"}
    assert lines.answers["b"].completion_tokens == 9
    assert lines.answers["a"].cost == 0.5
    assert not lines.failures and not lines.problems


def test_torn_foreign_repeated_and_bad_lines_are_one_problem_each() -> None:
    data = b"\n".join(
        [
            answer("a"),
            answer("stranger\x1b]52;c;x\x07"),  # foreign, with a terminal escape in it
            answer("a"),  # repeated
            b"[1, 2]",  # not an object
            b"{not json",  # bad JSON in the middle
            answer("b"),
            answer("c")[:40],  # torn: the file ends inside it
        ]
    )
    lines = read_lines(data, {"a", "b", "c"}, "batch_1 output file", 0.0, BatchLines())
    assert set(lines.answers) == {"a", "b"}
    assert "c" not in lines.failures  # not read: given back by the lane as unanswered
    assert len(lines.problems) == 5, lines.problems
    assert all(p.startswith("batch_1 output file line ") for p in lines.problems)
    assert "torn last line" in lines.problems[-1]
    assert not any("\x1b" in p or "\x07" in p for p in lines.problems)


def test_failed_requests_and_bodies_that_are_no_completion_are_failures() -> None:
    error = {
        "id": "r",
        "custom_id": "x",
        "response": None,
        "error": {"code": "batch_expired", "message": "the batch expired"},
    }
    status = {
        "id": "r",
        "custom_id": "y",
        "response": {"status_code": 500, "body": {"error": {"message": "boom"}}},
        "error": None,
    }
    shapeless = {
        "id": "r",
        "custom_id": "z",
        "response": {"status_code": 200, "body": {"choices": 5}},
        "error": None,
    }
    data = b"\n".join(orjson.dumps(item) for item in (error, status, shapeless)) + b"\n"
    lines = read_lines(data, {"x", "y", "z"}, "err", 0.0, BatchLines())
    assert not lines.answers and not lines.problems
    assert "batch_expired" in lines.failures["x"]
    assert "500" in lines.failures["y"]
    assert "choices" in lines.failures["z"]


def test_a_batch_object_of_the_wrong_shape_is_a_named_failure() -> None:
    state = batch_state(
        {
            "id": "b1",
            "status": "in_progress",
            "request_counts": {"total": 4, "completed": 1, "failed": 0},
        }
    )
    assert (state.total, state.completed, state.ended) == (4, 1, False)
    try:
        batch_state({"id": "b1", "status": "completed", "request_counts": 7})
    except Exception as exc:  # RequestFailed, naming the field
        assert "request_counts" in str(exc)
    else:
        raise AssertionError("a batch object with request_counts 7 was taken")
