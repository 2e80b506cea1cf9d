"""The plot view's points come from history.jsonl on the host that holds it, through the
watcher's tail request with `spread`: here and over SSH, a whole night's file comes back as
at most HISTORY_TAIL_LINES points from its first to its last, a line being written left out."""

from __future__ import annotations

from pathlib import Path

from gen_tui.backends import watcher
from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import DatasetHistory, summary
from gen_tui.backends.store.tails import HISTORY_TAIL_LINES
from tests.support.runs import AnyHost

POINTS = 5000
T0 = 1.7e9


async def test_a_whole_night_comes_back_spread_from_first_to_last(host: AnyHost) -> None:
    folder = Path(host.output_dir) / "A"
    folder.mkdir()
    lines = [
        HistoryPoint(T0 + 5 * i, 7, "active", 100 * i, i, 1.0, 1, 0).to_line()
        for i in range(POINTS)
    ]
    bad = range(2501, 2507)  # six lines in a row: one at least is picked, gaps being 5 or 6
    for number in bad:
        lines[number - 1] = b"not a point\n"
    (folder / watcher.HISTORY_FILE).write_bytes(b"".join(lines) + b'{"t": 17')  # being written
    tail = await host.tail_history("A")
    assert tail.error is None, tail.error
    assert 2 <= len(tail.lines) <= HISTORY_TAIL_LINES
    assert tail.numbers[0] == 1 and tail.numbers[-1] == POINTS, "first and last always kept"
    gaps = {b - a for a, b in zip(tail.numbers, tail.numbers[1:], strict=False)}
    assert gaps <= {5, 6}, f"not spread evenly: {sorted(gaps)}"
    assert [line.encode() + b"\n" for line in tail.lines] == [lines[n - 1] for n in tail.numbers]
    assert tail.total == POINTS and not tail.cut and tail.start == 0
    history = DatasetHistory.of_tail("A", tail)
    assert history.points[0].t == T0 and history.points[-1].t == T0 + 5 * (POINTS - 1)
    assert not history.partial, "the whole span came: nothing older was left behind"
    named = [n for n in tail.numbers if n in bad]
    assert named and history.problems == tuple(f"{tail.path}:{n}: not JSON" for n in named)
    shown = f"{len(history.points):,} of {POINTS:,} points over 6.9 h"
    assert shown in summary(history, None)
    missing = DatasetHistory.of_tail("nope", await host.tail_history("nope"))
    assert missing.error and "does not exist" in missing.error
