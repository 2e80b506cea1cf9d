"""A real run's quality figures in progress.json; the ends of record files and logs read
through a host, on this machine and over sshd, and from the end of a 10 GB file."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.hosts.resume import resume_log_path
from gen_tui.backends.progress.quality import LENGTH_EDGES
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.samples import parse_samples
from gen_tui.backends.store.tails import Tail
from tests.support.polling import wait_until
from tests.support.records import read_records

AnyHost = Any


def _bucket(tokens: int) -> int:
    return next((i for i, edge in enumerate(LENGTH_EDGES) if tokens < edge), len(LENGTH_EDGES))


@pytest.mark.parametrize("name", ["A", "B"])
def test_a_finished_run_publishes_what_its_records_say(
    finished_run: tuple[Path, Path], name: str
) -> None:
    folder = finished_run[0] / name
    records = read_records(folder)
    progress = ProgressFile.read(folder / "progress.json")
    assert progress is not None and progress.quality is not None
    quality = progress.quality
    assert quality.answers == len(records)
    assert dict(quality.finish) == dict(Counter(r["finish_reason"] for r in records))
    assert "length" in dict(quality.finish), "the run's cap cuts some answers (see run_output)"
    lengths = Counter(_bucket(r["completion_tokens"]) for r in records)
    assert {i: n for i, n in enumerate(quality.lengths) if n} == dict(lengths)
    assert sum(quality.latency) == sum(1 for r in records if "latency_s" in r)
    assert quality.latency_quantile(0.5) is not None
    assert progress.prompts_left == 0, "every prompt was answered"


async def test_a_watched_dataset_shows_the_writers_quality(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    from gen_tui.backends.hosts import LocalHost

    out = tmp_path / "out"
    shutil.copytree(finished_run[0] / "A", out / "A")
    monitor = HostMonitor(LocalHost(out), ["A"], discover=False)
    task = asyncio.create_task(monitor.run())
    try:
        snap = await wait_until(
            lambda: (s := monitor.snapshot("A", 0.0)) is not None and s.samples > 0 and s,
            30,
            "A's counted snapshot",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    progress = ProgressFile.read(out / "A" / "progress.json")
    assert progress is not None
    assert snap.quality == progress.quality and snap.quality is not None


async def test_the_last_records_come_from_the_end_of_the_file_on_either_host(
    host: AnyHost, finished_run: tuple[Path, Path]
) -> None:
    out = Path(host.output_dir)
    shutil.copytree(finished_run[0] / "A", out / "A")
    path = out / "A" / watcher.RAW_FILE
    with open(path, "ab") as handle:
        handle.write(b'{"sample_id": "torn", "completion_tok')  # a record being written
    lines = path.read_bytes().split(b"\n")[:-1]
    tail = await host.tail_records("A", 5)
    assert tail.error is None, tail.error
    assert [line.encode() for line in tail.lines] == lines[-5:]
    samples = parse_samples(tail.lines)
    expected = [str(r["sample_id"]) for r in read_records_whole(lines[-5:])]
    assert [s.sample_id for s in samples] == expected[::-1], "newest first"
    assert all(s.answer and s.source == "text" for s in samples)
    missing = await host.tail_records("nope", 5)
    assert missing.error and "does not exist" in missing.error and not missing.lines


def read_records_whole(lines: list[bytes]) -> list[dict[str, Any]]:
    import orjson

    return [orjson.loads(line) for line in lines]


async def test_a_runs_log_is_found_and_its_end_read_on_either_host(host: AnyHost) -> None:
    out = host.output_dir
    log = resume_log_path(out, "A")  # where a resume started by gen-tui writes
    script = "for i in $(seq 1 500); do echo line $i; done; sleep 30"
    identity = await host.start(["sh", "-c", script], log)
    await wait_until(lambda: b"line 500\n" in Path(log).read_bytes(), 30, "the log's 500 lines")
    tail: Tail = await host.tail_log("A", 20)
    assert tail.error is None, tail.error
    assert tail.lines[0] == "line 481" and tail.lines[-1] == "line 500"
    assert tail.path == log
    await host.kill(identity, grace_s=1)
    none = await host.tail_log("B", 20)
    assert none.error == "no log found for this run" and not none.lines


def test_the_end_of_a_10_gb_file_is_read_without_reading_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / watcher.RAW_FILE
    with open(path, "wb") as handle:
        handle.truncate(10 << 30)  # sparse: 10 GB of NULs that take no disk
        handle.seek(0, os.SEEK_END)
        for index in range(50):
            handle.write(
                b'{"sample_id": %d, "completion_tokens": 3, "text": "t%d"}\n' % (index, index)
            )
    read: list[int] = []
    pread = os.pread

    def counted(fd: int, size: int, offset: int) -> bytes:
        read.append(size)
        return pread(fd, size, offset)

    monkeypatch.setattr(watcher.os, "pread", counted)
    report = watcher.tail(str(path), 10, watcher.TAIL_MAX_BYTES, whole=True)
    assert [line[-6:] for line in report["lines"]][-1] == '"t49"}'
    assert len(report["lines"]) == 10 and report["size"] > 10 << 30
    assert sum(read) <= 2 * watcher.TAIL_CHUNK, f"read {sum(read):,} bytes of 10 GB"
    # the first record sits at the end of a 10 GB "line" of NULs, longer than the cap: it is
    # not returned cut, it is said to be missing
    capped = watcher.tail(str(path), 60, 1 << 20, whole=True)
    assert capped["cut"] and len(capped["lines"]) == 49
    assert capped["lines"][0].startswith('{"sample_id": 1,')
