"""Streamed responses make the same records as plain ones, from cumulative frames and from
--stream-output servers' incremental ones alike: a record holds the whole output either way.

The engine in-process against the simulator on loopback, with a real tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine import make_config, run
from tests.support.records import read_records


@pytest.mark.quick
@pytest.mark.parametrize("stream_output", [False, True])
async def test_streaming_matches_non_streaming(
    stream_output: bool,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(stream_output=stream_output, frame_tokens=7)
    prompts = prompts_dir(A=12)
    for stream in (False, True):
        config = make_config(
            tokenizer_dir, prompts, tmp_path / str(stream), [server.url], stream=stream
        )
        await run(config)
    plain = {r["sample_id"]: r["output_ids"] for r in read_records(tmp_path / "False" / "A")}
    streamed = {r["sample_id"]: r["output_ids"] for r in read_records(tmp_path / "True" / "A")}
    assert plain == streamed and len(plain) == 12


async def test_stream_output_frames_keep_the_whole_text(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """--stream-output servers send only the new ids and text per frame: the record must
    hold all of it, exactly as a cumulative stream or a plain response gives it."""
    prompts = prompts_dir(A=40)
    texts = {}
    for name, stream_output in (("cumulative", False), ("incremental", True)):
        server = await sim(tokens_per_s=20000, slots=16, stream_output=stream_output)
        config = make_config(
            tokenizer_dir, prompts, tmp_path / name, [server.url], stream=True, concurrency=8
        )
        await run(config)
        records = read_records(tmp_path / name / "A")
        assert len(records) == 40
        texts[name] = {r["sample_id"]: r["text"] for r in records}
    assert texts["incremental"] == texts["cumulative"]
    assert all(len(t.split()) > 1 for t in texts["incremental"].values() if t)
