"""Regression tests for the defects the chaos suite found, one per fix, with the exact input.

Each of these failed before its fix (the fuzz tests find the same inputs, but only with
luck); keeping them as plain examples makes the fixes stay fixed in the short CI run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from gen_tui.backends import watcher
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import DatasetSpec, Engine, EngineConfig, EngineError
from gen_tui.backends.figures import CountError, parse_count
from gen_tui.backends.store.prompts import DatasetNameError, check_dataset_name, discover_datasets
from gen_tui.backends.store.records import RecordFileError, scan_records

from .checker import FolderState, check_folder, prompt_ids
from .procs import openai_stub

# ---- names: "$" matched before a final newline ------------------------------------------


@pytest.mark.parametrize("name", ["B1\n", "0\n", "B2_opencodeinstruct\n"])
def test_a_name_ending_in_a_newline_is_refused_everywhere(name: str, tmp_path: Path) -> None:
    with pytest.raises(DatasetNameError):
        check_dataset_name(name)
    with pytest.raises(ValueError):
        watcher.parse_dataset_arg(str(tmp_path), name)
    with pytest.raises(ValueError):
        watcher.parse_dataset_arg(str(tmp_path), f"{name}:0:0:0:0:0")
    (tmp_path / f"{name}.jsonl").write_text('{"prompt": "hi"}\n')
    with pytest.raises(DatasetNameError):
        discover_datasets(tmp_path)


# ---- counts: huge exponents hung or raised decimal.Overflow -----------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e999999", "too large"),  # took ~40 s to build a million-digit int
        ("1e1000000", "too large"),  # raised decimal.Overflow, a traceback in the CLI
        ("1e-2000000", "not a whole number"),  # underflowed to 0 and was accepted
        ("1.000000000000000000000000000001k", "not a whole number"),  # rounded to 1000
        (10**19, "too large"),  # a TOML integer: progress.json could not hold it
    ],
)
def test_absurd_counts_are_refused_at_once(text: str | int, message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CountError, match=message):
        parse_count(text, what="--token-budget")
    assert time.perf_counter() - started < 0.1


def test_counts_at_the_cap_still_parse() -> None:
    assert parse_count("1e18") == 10**18
    assert parse_count("0e999999999") == 0
    assert parse_count("100e-2") == 1


# ---- config: a NUL in a path raised a bare ValueError -----------------------------------


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ('[[datasets]]\nname = "A"\nprompts = "a\\u0000b"\n', "datasets[0].prompts"),
        ('[run]\noutput_dir = "out\\u0000"\n', "run.output_dir"),
        ('[run]\nserver_urls = ["http://x\\u0000"]\n', "run.server_urls"),
    ],
)
def test_a_nul_in_a_config_string_is_a_config_error(doc: str, key: str, tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text(doc)
    with pytest.raises(ConfigError, match=re.escape(f"{key} contains a NUL character")):
        load_config(path)


# ---- records: a cut write with the next record glued on was counted as the cut one -------

CUT = b'{"sample_id":"a","completion_tokens":5,"output_ids":[1,2'
WHOLE = b'{"sample_id":"b","completion_tokens":3,"prompt_tokens":1,"finish_reason":"stop"}'


def test_a_glued_last_line_is_torn_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    path.write_bytes(WHOLE.replace(b'"b"', b'"c"') + b"\n" + CUT + WHOLE + b"\n")
    scan = scan_records(path)
    assert (scan.done, scan.tokens, scan.records) == ({"c"}, 3, 1)
    assert scan.torn_tail == CUT + WHOLE + b"\n"


def test_a_glued_line_in_the_middle_is_named(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    path.write_bytes(CUT + WHOLE + b"\n" + WHOLE.replace(b'"b"', b'"c"') + b"\n")
    with pytest.raises(RecordFileError, match=r"raw_responses.jsonl:1: not valid JSON"):
        scan_records(path)


@pytest.mark.parametrize("cut", [b"{", b'{"', b'{"sam', b'{"sample_id"'])
def test_the_watcher_does_not_count_a_glued_line_either(cut: bytes, tmp_path: Path) -> None:
    """Cut before its first key ends, the glued line holds each key once: still no record."""
    assert watcher.record_tokens(cut + WHOLE) is None
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "raw_responses.jsonl").write_bytes(WHOLE + b"\n" + cut + WHOLE + b"\n")
    tail = watcher.DatasetTail(str(tmp_path), "x")
    tail.poll()
    scan = scan_records(folder / "raw_responses.jsonl")
    assert (tail.total_tokens, tail.total_samples) == (scan.tokens, scan.records) == (3, 1)


# ---- engine: a client that choked on a malformed answer dropped the sample silently ------


@pytest.fixture
async def odd_server() -> AsyncIterator[tuple[str, dict[str, int]]]:
    """An OpenAI-style server whose first stream per prompt has `"choices": 5`; later ones
    are fine, except for prompts saying "always", which only ever get the bad stream."""
    attempts: dict[str, int] = {}

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = body["messages"][-1]["content"]
        attempts[text] = attempts.get(text, 0) + 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if attempts[text] == 1 or text.startswith("always"):
            await response.write(b'data: {"choices": 5}\n\ndata: [DONE]\n\n')
        else:
            chunk = {
                "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            }
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")
        await response.write_eof()
        return response

    async with openai_stub(chat) as url:
        yield url, attempts


async def test_a_malformed_answer_is_a_retried_attempt_not_a_lost_sample(
    odd_server: tuple[str, dict[str, int]], tmp_path: Path
) -> None:
    url, attempts = odd_server
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    lines = [{"id": f"A-{n}", "prompt": f"question {n}"} for n in range(4)]
    lines.append({"id": "A-bad", "prompt": "always broken"})
    (prompts / "A.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    events: list[tuple[str, str]] = []
    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts / "A.jsonl")],
        server_urls=[url],
        tokenizer="",
        output_dir=tmp_path / "out",
        api="openai",
        stream=True,
        max_retries=1,
        concurrency=4,
    )
    await Engine(config, on_event=lambda level, text: events.append((level, text))).run()
    assert not [text for _, text in events if "internal error" in text], events
    state = FolderState(tmp_path / "out" / "A")
    check_folder(state, prompt_ids(prompts / "A.jsonl"), clean_exit=True)
    assert state.ever == {"A-0", "A-1", "A-2", "A-3"}  # each after one malformed answer
    assert all(attempts[f"question {n}"] == 2 for n in range(4))
    errors = [json.loads(line) for line in (state.folder / "errors.jsonl").read_text().splitlines()]
    assert [e["sample_id"] for e in errors] == ["A-bad"]
    assert "a stream chunk has choices of type int" in errors[0]["reason"]


def test_write_prompts_is_what_prompt_ids_reads(tmp_path: Path) -> None:
    """The crash loop's own plumbing: its independent id reader agrees with the writer."""
    write_prompts(tmp_path / "A.jsonl", 3)
    assert prompt_ids(tmp_path / "A.jsonl") == {"A-0", "A-1", "A-2"}


# ---- disk trouble: half a line left behind, and tracebacks instead of one line -----------

PARTIAL_WRITE = r"""
import os, resource, signal, sys
from pathlib import Path
from gen_tui.backends.store.records import RecordWriter
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit: EFBIG, not death
writer = RecordWriter(path)
writer.write(b'{"sample_id":"a","completion_tokens":1}\n')
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, size + 10))
try:
    writer.write(b'{"sample_id":"b","completion_tokens":1,"output_ids":[1]}\n')
except OSError as exc:
    print("refused", exc.errno)
print(path.stat().st_size == size)
"""


def test_a_write_the_disk_takes_only_half_of_leaves_no_half_line(tmp_path: Path) -> None:
    """A file size limit takes part of a write then refuses the rest, as a full disk does."""
    path = tmp_path / "raw_responses.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", PARTIAL_WRITE, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["refused", "27", "True"], result.stdout
    assert path.read_bytes() == b'{"sample_id":"a","completion_tokens":1}\n'


async def test_an_output_folder_that_cannot_be_made_is_one_clear_error(
    odd_server: tuple[str, dict[str, int]], tmp_path: Path
) -> None:
    url, _ = odd_server
    (tmp_path / "A.jsonl").write_text('{"prompt": "hi"}\n')
    blocker = tmp_path / "out"
    blocker.write_text("a file where the output folder should be")
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl")],
        server_urls=[url],
        tokenizer="",
        output_dir=blocker,
        api="openai",
    )
    with pytest.raises(EngineError, match=r"A: cannot write in .*out"):
        await Engine(config).run()
