"""Issue 30, point 9: numbers others wrote, read where they are read and range-checked there.

A history point `"t": 1e308` made `report --html` exit 1 with OverflowError; records
`created` ±1e308 printed a 309-digit wall time; `h` stayed on "reading the history…" and
`a` stretched the time axis to 2e+304 h; a fake `nvidia-smi` printing 1e308 drew 300-digit
memory, power and temperature and a 20-digit index. Real processes: the `gen-tui report`
command, the watcher's tail of a history file, a stand-in nvidia-smi on the watcher's PATH.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import DatasetHistory, TimeAxis, summary
from gen_tui.backends.watcher import HISTORY_FILE, RAW_FILE
from gen_tui.widgets.gpu_strip import GpuLine, compact_line, tall_line
from tests.support.gpus import write_nvidia_smi
from tests.support.polling import wait_until
from tests.support.run_output import gen_tui

T0 = 1.7e9
WIDEST = 16
"""No figure drawn from a hostile number is wider than this."""


def point(t: float, tokens: int) -> bytes:
    return (
        HistoryPoint(T0, 7, "active", tokens, tokens, 1.0, 1, 0)
        .to_line()
        .replace(b'"t":1700000000.0', b'"t":' + json.dumps(t).encode())
    )


def hostile_dataset(folder: Path) -> None:
    folder.mkdir(parents=True)
    records = [
        {"sample_id": "a", "completion_tokens": 5, "created": 1e308, "latency_s": 1e308,
         "cost": 1e308},
        {"sample_id": "b", "completion_tokens": 7, "created": -1e308, "latency_s": 0.5,
         "cost": 0.01},
        {"sample_id": "c", "completion_tokens": 9, "created": T0, "latency_s": 1.5},
    ]  # fmt: skip
    (folder / RAW_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / HISTORY_FILE).write_bytes(point(T0, 5) + point(1e308, 12) + point(T0 + 60, 21))


def widest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def test_report_and_its_page_with_hostile_numbers_exit_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    hostile_dataset(out / "A")
    page = tmp_path / "report.html"
    done = gen_tui("report", "--output-dir", str(out), "--html", str(page))
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr
    assert widest_word(stdout) < WIDEST, stdout
    row = stdout.splitlines()[1].split()
    assert row[:3] == ["A", "21", "3"] and row[3] == "1m00s", row  # the sane points' wall
    history = out / "A" / HISTORY_FILE
    assert f"{history}:2: field 't' is out of range (1e+308: not a Unix time" in stderr
    records = out / "A" / RAW_FILE
    for line, field in ((1, "created"), (1, "latency_s"), (1, "cost"), (2, "created")):
        assert f"{records}:{line}: field {field!r} is out of range" in stderr, stderr
    assert len(max(stderr.splitlines(), key=len)) < 300
    html = page.read_text()
    assert max(len(word) for word in html.replace("<", " <").split()) < 200
    print(f"report: exit {done.returncode}; {len(stderr.splitlines())} lines said")


async def test_history_view_and_axis_leave_out_of_range_points(tmp_path: Path) -> None:
    out = tmp_path / "out"
    hostile_dataset(out / "A")
    (out / "B").mkdir()
    (out / "B" / HISTORY_FILE).write_bytes(point(T0, 1) + point(T0 + 30, 2) + point(-1e308, 3))
    host = LocalHost(out)
    histories = [DatasetHistory.of_tail(name, await host.tail_history(name)) for name in "AB"]
    a, b = histories
    assert [p.t for p in a.points] == [T0, T0 + 60] and a.bad == 1
    (said,) = a.problems
    assert said.startswith(f"{out / 'A' / HISTORY_FILE}:2: field 't' is out of range"), said
    assert [p.t for p in b.points] == [T0, T0 + 30] and b.bad == 1
    axis = TimeAxis.over(histories)  # `a`: every dataset on one axis
    assert (axis.unit, axis.span) == ("s", 60.0)
    values, labels = axis.ticks()
    assert max(values) <= 60 and max(len(label) for label in labels) < WIDEST
    assert axis.label().startswith("s since ")
    for history in histories:
        line = summary(history, 10**6)
        assert widest_word(line) < WIDEST and "1 bad line" in line, line


ROWS = [
    "1e308, NVIDIA H100, 1e308, 1e308, 1e308, 1e308, 1e308",
    "0, NVIDIA H100, nan, 1e308, inf, 1e308, -inf",
    "1, NVIDIA H100, 50, 1024, 81559, 612.5, 1e999",
    "99999999999999999999, NVIDIA H100, 1, 1, 2, 3, 4",
]


async def test_a_fake_nvidia_smi_printing_1e308_draws_no_huge_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = write_nvidia_smi(tmp_path / "bin", ROWS)
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out"
    hostile_dataset(out / "A")  # a dataset to watch: the watcher reads the GPUs beside it
    monitor = HostMonitor(LocalHost(out), survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        gpus = await wait_until(
            lambda: monitor.telemetry.board.gpus,
            30,
            "the stand-in's GPUs",
            detail=lambda: f"absent={monitor.telemetry.gpus_absent}",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [gpu.index for gpu in gpus] == [0, 1], "rows with no GPU's index left out"
    first, second = gpus
    assert (first.util, first.mem_used, first.mem_total, first.power, first.temp) == ((None,) * 5)
    assert (second.util, second.mem_used, second.power, second.temp) == (50, 1024, 612.5, None)
    lines = tuple(GpuLine("box", gpu) for gpu in gpus)
    for text in (*map(tall_line, lines), compact_line(lines, 200)):
        assert widest_word(text) < WIDEST + 8, text  # "73.6/79.6G": two figures in a word
        assert len(text) < 160, text
