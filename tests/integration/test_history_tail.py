"""The plot view's points come from the end of history.jsonl on the host that holds it,
through the watcher's tail request: here and over SSH, capped, a line being written left out."""

from __future__ import annotations

import shutil
from pathlib import Path

from gen_tui.backends import watcher
from gen_tui.backends.history import HistoryPoint
from gen_tui.backends.history_series import DatasetHistory
from gen_tui.backends.tails import HISTORY_TAIL_LINES
from tests.support.runs import AnyHost


async def test_the_history_end_comes_through_the_host_bounded(
    host: AnyHost, finished_run: tuple[Path, Path]
) -> None:
    out = Path(host.output_dir)
    shutil.copytree(finished_run[0] / "A", out / "A")
    path = out / "A" / watcher.HISTORY_FILE
    earlier = b"".join(
        HistoryPoint(1e9 + 5 * i, 7, "active", i, i, 1.0, 1, 0).to_line()
        for i in range(HISTORY_TAIL_LINES)
    )
    path.write_bytes(earlier + path.read_bytes() + b'{"t": 17')  # a point being written
    lines = path.read_bytes().split(b"\n")[:-1]
    tail = await host.tail_history("A")
    assert tail.error is None, tail.error
    assert [line.encode() for line in tail.lines] == lines[-HISTORY_TAIL_LINES:]
    history = DatasetHistory.of_tail("A", tail)
    assert len(history.points) == HISTORY_TAIL_LINES and history.bad == 0
    assert history.partial, "the oldest points stayed on the host"
    missing = DatasetHistory.of_tail("nope", await host.tail_history("nope"))
    assert missing.error and "does not exist" in missing.error
