"""The watcher's `--heads` lookup stays bounded on any prompt file: it stops once every key is
found, reads no further than its byte bound (and says so), passes a runaway line without
holding it, refuses a FIFO without blocking, and finds a foreign run's prompt file from its
`--prompts-dir` when no manifest names one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from gen_tui.backends import watcher
from gen_tui.backends.store.prompt_heads import PromptHeads
from tests.support.polling import wait_until


def prompt(key: str, text: str = "what is 2+2?") -> bytes:
    return orjson.dumps({"id": key, "prompt": text}) + b"\n"


def test_the_scan_stops_once_all_are_found_and_at_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    first = prompt("a")
    path.write_bytes(first + prompt("b") * 50 + prompt("z"))
    found = watcher.find_heads(str(path), ["a"], len(first))
    assert found["heads"] == {"a": {"before": 0, "text": "what is 2+2?", "chars": 12}}
    assert not found["bounded"], "it read past the last key it needed"
    cut = watcher.find_heads(str(path), ["a", "z"], 10 * len(first))
    assert set(cut["heads"]) == {"a"} and cut["bounded"]
    said = PromptHeads.of_report(cut, 10 * len(first)).missing
    assert said == f"not in the first {10 * len(first)} bytes of {path} (the scan's bound)"


def test_a_runaway_line_is_passed_and_a_fifo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "x", "prompt": "' + b"y" * (watcher.MAX_PROMPT_LINE + 10) + b'"}\n')
    with open(path, "ab") as handle:
        handle.write(prompt("a"))
    assert set(watcher.heads_request({"path": str(path), "keys": ["x", "a"]})["heads"]) == {"a"}
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    refused = watcher.heads_request({"path": str(fifo), "keys": ["a"]})
    assert refused["error"] == f"{fifo} is a FIFO, not a regular file"


def test_the_request_is_capped_whatever_it_asks(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"".join(prompt(f"k{i}", "q" * 5000) for i in range(300)))
    spec = {"path": str(path), "keys": [f"k{i}" for i in range(300)], "chars": 10**6}
    found = watcher.heads_request(spec)["heads"]
    assert len(found) == watcher.MAX_HEAD_KEYS
    assert all(len(head["text"]) <= 4 * watcher.PROMPT_HEAD_CHARS for head in found.values())
    assert found["k0"]["chars"] == 5000


async def test_a_foreign_runs_prompt_file_comes_from_its_command_line(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "A.jsonl").write_bytes(prompt("s1", "from the command line"))
    (tmp_path / "out" / "A").mkdir(parents=True)
    run = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--prompts-dir", "prompts"],
        cwd=tmp_path,
    )
    try:
        cmdline = Path(f"/proc/{run.pid}/cmdline")
        await wait_until(lambda: b"--prompts-dir" in cmdline.read_bytes(), 10, "the run's exec")
        spec = {"output_dir": str(tmp_path / "out"), "dataset": "A", "keys": ["s1"]}
        assert "no prompt file known for A" in watcher.heads_request(spec)["error"]
        found = watcher.heads_request({**spec, "pid": run.pid})
        assert found["path"] == str(tmp_path / "prompts" / "A.jsonl")
        assert found["heads"]["s1"]["text"] == "from the command line"
    finally:
        run.kill()
        run.wait()
