"""The GPU strip: eight GPUs on one 80-column line, a line each with history when tall, and
the watcher's rows typed (a wrong field unknown, a name harmless, the history bounded)."""

from __future__ import annotations

from gen_tui.backends.telemetry.gpus import HISTORY, Gpu, GpuBoard, parse_gpus
from gen_tui.widgets.gpu_strip import GpuLine, bar, compact_line, strip_text, tall_line

UTIL = [97, 3, 50, 100, 0, 12, 88, 64]


def _gpus(host: str = "box") -> tuple[GpuLine, ...]:
    return tuple(
        GpuLine(
            host,
            Gpu(i, "NVIDIA H100 80GB HBM3", util=u, mem_used=40000.0, mem_total=81559.0),
            (0.1, 0.9),
        )
        for i, u in enumerate(UTIL)
    )


def test_eight_gpus_fit_one_80_column_line() -> None:
    line = compact_line(_gpus(), 80)
    assert len(line) <= 80 and "+" not in line
    for index, util in enumerate(UTIL):
        assert f" {index} {util}%" in line
    assert " 3 100%█▄" in line and " 4 0%▁▄" in line  # idle is drawn, not blank


def test_more_than_fit_are_counted() -> None:
    both = _gpus("a") + _gpus("b")
    line = compact_line(both, 80)
    assert len(line) <= 80 and line.startswith("GPU util·mem a:0 97%")
    shown = line.count("%")
    assert line.endswith(f" +{len(both) - shown}")


def test_tall_lines_say_everything() -> None:
    gpu = Gpu(0, "H100", util=97, mem_used=75321, mem_total=81559, power=612.4, temp=71)
    line = tall_line(GpuLine("box", gpu, (0.0, 0.5, 1.0)))
    assert line.startswith("GPU0 H100  util [█████████▊]  97% ▁▅█")  # 9.7 cells
    assert "73.6/79.6G" in line and line.endswith("612W  71°C")
    assert strip_text(_gpus(), 160, tall=True).count("\n") == 7
    assert bar(None, 4) == "[????]" and bar(0.5, 4) == "[██  ]"
    assert strip_text((), 80, tall=False) == ""


def test_rows_from_the_watcher_are_typed_and_bounded() -> None:
    rows = [
        {"index": 0, "name": "H100\x1b[2J", "util": 250, "mem_used": 1, "mem_total": 2,
         "power": None, "temp": "hot"},
        {"index": "1"}, "junk", {"index": True},
    ]  # fmt: skip
    (gpu,) = parse_gpus(rows)
    assert gpu.name == "H100\ufffd[2J" and gpu.util is None and gpu.temp is None
    assert gpu.mem_fraction == 0.5
    assert parse_gpus({"index": 0}) == ()

    board = GpuBoard()
    for step in range(HISTORY + 5):
        board.add([Gpu(0, "x", util=step % 100, mem_used=1, mem_total=4)])
    util, memory = board.history(0)
    assert len(util) == HISTORY and util[-1] == (HISTORY + 4) / 100
    assert set(memory) == {0.25}
    assert board.history(7) == ((), ())
