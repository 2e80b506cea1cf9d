from pathlib import Path

import pytest

from gen_tui.backends.store.prompts import (
    DatasetNameError,
    Prompt,
    PromptProblem,
    check_dataset_name,
    discover_datasets,
    iter_prompts,
)


def _write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_three_layouts_and_ids(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "d.jsonl",
        '{"id": "m1", "messages": [{"role": "system", "content": "s"}, '
        '{"role": "user", "content": "hi"}, {"role": "assistant", "content": "old"}]}',
        '{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}',
        "",
        '{"sample_id": 9, "prompt": "write"}',
    )
    items = list(iter_prompts(path))
    assert all(isinstance(item, Prompt) for item in items)
    first, second, third = items  # type: ignore[misc]
    assert first.sample_id == "m1"
    assert first.messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert second.sample_id == 2 and second.messages == [{"role": "user", "content": "q"}]
    assert third.sample_id == 9 and third.messages == [{"role": "user", "content": "write"}]


def test_bad_lines_are_reported_with_file_line_and_reason(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "d.jsonl",
        '{"prompt": "ok"}',
        "not json",
        '{"text": "no known field"}',
        '{"messages": [{"role": "wizard", "content": "x"}]}',
        '{"id": 1.5, "prompt": "x"}',
        '{"id": "a", "prompt": "x"}',
        '{"id": "a", "prompt": "again"}',
        "[1, 2]",
        '{"messages": [{"role": "assistant", "content": "only"}]}',
    )
    items = list(iter_prompts(path))
    problems = [item for item in items if isinstance(item, PromptProblem)]
    assert [p.line for p in problems] == [2, 3, 4, 5, 7, 8, 9]
    text = "\n".join(str(p) for p in problems)
    assert f"{path}:2: not valid JSON" in text
    assert "no 'messages', 'conversations' or 'prompt' field" in text
    assert "messages[0].role' has unknown role 'wizard'" in text
    assert "duplicate sample_id 'a' (first at line 6)" in text
    assert "no user turn" in text


def test_skip_done(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", '{"prompt": "a"}', '{"prompt": "b"}', '{"prompt": "c"}')
    keys = [p.key for p in iter_prompts(path, skip={"2"}) if isinstance(p, Prompt)]
    assert keys == ["1", "3"]


@pytest.mark.parametrize("name", ["../x", "a b", "a;rm", "", ".hidden", "a/b", "x\ny", "é"])
def test_dataset_names_are_validated(name: str) -> None:
    with pytest.raises(DatasetNameError):
        check_dataset_name(name)


def test_discover(tmp_path: Path) -> None:
    _write(tmp_path / "B2_opencodeinstruct.jsonl", '{"prompt": "a"}')
    _write(tmp_path / "B1_glaive.jsonl", '{"prompt": "a"}')
    (tmp_path / "notes.txt").write_text("x")
    assert list(discover_datasets(tmp_path)) == ["B1_glaive", "B2_opencodeinstruct"]


def test_an_overlong_line_is_named_and_read_past_in_bounded_memory(tmp_path: Path) -> None:
    """A runaway line (here 3 MiB against a 1 MiB cap, also the last one without a newline)
    is one problem with file:line and its size; the lines around it are read as usual."""
    path = tmp_path / "d.jsonl"
    huge = b'{"prompt": "' + b"x" * (3 << 20) + b'"}'
    path.write_bytes(b'{"prompt": "a"}\n' + huge + b'\n{"prompt": "b"}\n' + huge)
    items = list(iter_prompts(path, max_line_bytes=1 << 20))
    assert [p.line for p in items if isinstance(p, Prompt)] == [1, 3]
    problems = [str(p) for p in items if isinstance(p, PromptProblem)]
    size = f"{len(huge) + 1:,}"
    assert problems == [
        f"{path}:2: line is {size} bytes, over the 1,048,576 allowed",
        f"{path}:4: line is {len(huge):,} bytes, over the 1,048,576 allowed",
    ]


def test_a_line_exactly_at_the_cap_is_read(tmp_path: Path) -> None:
    line = b'{"prompt": "' + b"y" * 100 + b'"}\n'
    path = tmp_path / "d.jsonl"
    path.write_bytes(line + line.replace(b"y", b"z"))
    items = list(iter_prompts(path, max_line_bytes=len(line) - 1))
    assert [type(item) for item in items] == [Prompt, Prompt]
    items = list(iter_prompts(path, max_line_bytes=len(line) - 2))
    assert [type(item) for item in items] == [PromptProblem, PromptProblem]
