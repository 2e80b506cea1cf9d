"""The prompt heads of the sample viewer: found by sample key in either layout, cleaned and
cut, the scan bounded, and every missing head explained."""

from __future__ import annotations

from pathlib import Path

import orjson

from gen_tui.backends.store.prompt_heads import PROMPT_HEAD_CHARS, head_of, prompt_heads


def write(path: Path, *lines: dict | bytes) -> Path:
    path.write_bytes(
        b"".join(x if isinstance(x, bytes) else orjson.dumps(x) + b"\n" for x in lines)
    )
    return path


def test_heads_are_found_by_key_in_any_layout_and_line_numbers_count(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.jsonl",
        {"id": "a", "messages": [{"role": "user", "content": "what is 2+2?"}]},
        b"not json\n",
        {"prompt": "third line, no id"},
        {"sample_id": 9, "conversations": [{"from": "human", "value": "hi there"}]},
    )
    found = prompt_heads(path, ["a", "3", "9", "zzz"])
    assert found.heads == {"a": "what is 2+2?", "3": "third line, no id", "9": "hi there"}
    assert found.missing == f"not in {path} (changed since the run?)"


def test_a_head_is_the_last_user_turn_cleaned_and_cut() -> None:
    messages = [
        {"role": "system", "content": "be terse"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "\x1b[2J[bold]evil[/bold] " + "x" * 1000},
    ]
    head = head_of(messages)
    assert head.startswith("(+3 earlier messages) \ufffd[2J[bold]evil[/bold] xxx")
    assert "\x1b" not in head
    assert head.endswith("… (722 more characters)")
    assert len(head) < PROMPT_HEAD_CHARS + 60


def test_the_scan_stops_at_its_bound_and_says_so(tmp_path: Path) -> None:
    lines = [{"id": f"s{i}", "prompt": "p" * 100} for i in range(200)]
    path = write(tmp_path / "big.jsonl", *lines)
    found = prompt_heads(path, ["s0", "s199"], max_bytes=4096)
    assert list(found.heads) == ["s0"]
    assert found.missing.startswith("not in the first 4,096 bytes of ")


def test_no_file_here_and_an_unreadable_one_are_said() -> None:
    assert prompt_heads(None, ["a"], "it is on gpu-box").missing == "it is on gpu-box"
    gone = prompt_heads(Path("/nonexistent/p.jsonl"), ["a"])
    assert gone.heads == {} and gone.missing.startswith("cannot read /nonexistent/p.jsonl: ")
