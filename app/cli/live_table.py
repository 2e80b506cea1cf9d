"""The live table `gen-tui run` draws on a terminal, fitted to its width.

It runs on the GPU box, often in a narrow tmux pane: every figure is shown whole at 80
columns. What gives way, in order: the progress bar narrows, then goes; then the samples
column; then long dataset names are shortened from the middle (both ends tell B2_open…struct
apart from B2_open…chat). Numbers are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, JustifyMethod, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from gen_tui.backends.figures import format_count
from gen_tui.backends.progress.snapshot import DatasetSnapshot, RunSnapshot
from gen_tui.widgets.format import format_dollars, format_duration, server_text, state_text

GAP = 1
"""Spaces between columns."""
BAR_MAX, BAR_MIN = 24, 6
NAME_MIN = 8


def budget_text(snap: DatasetSnapshot) -> str:
    tokens = format_count(snap.tokens)
    if snap.max_tokens is not None:
        return f"{tokens}/{format_count(snap.max_tokens)}"
    return tokens


def _samples(d: DatasetSnapshot) -> str:
    return f"{d.samples:,}" + (f"/{d.max_samples:,}" if d.max_samples else "")


def shorten(name: str, width: int) -> str:
    """`name` in `width` characters, its middle replaced by … when it does not fit."""
    if len(name) <= width:
        return name
    head = width // 2
    tail = width - 1 - head
    return name[:head] + "…" + (name[-tail:] if tail else "")


@dataclass(frozen=True)
class _Column:
    title: str
    justify: JustifyMethod
    cells: list[str]

    @property
    def width(self) -> int:
        return max([len(self.title), *(len(cell) for cell in self.cells)])


def _text_columns(datasets: Sequence[DatasetSnapshot]) -> list[_Column]:
    return [
        _Column("dataset", "left", [d.name for d in datasets]),
        _Column("state", "left", [state_text(d.state) for d in datasets]),
        _Column("tokens", "right", [budget_text(d) for d in datasets]),
        _Column("samples", "right", [_samples(d) for d in datasets]),
        _Column("tok/s", "right", [format_count(d.tok_s) for d in datasets]),
        _Column("fly", "right", [str(d.inflight) for d in datasets]),
        _Column("ETA", "right", [format_duration(d.eta_s) for d in datasets]),
    ]


def fit(datasets: Sequence[DatasetSnapshot], width: int) -> tuple[list[_Column], int]:
    """The columns that fit `width` (names shortened if need be) and the bar's width (0: none)."""
    columns = _text_columns(datasets)

    def used(cols: list[_Column]) -> int:
        return sum(col.width for col in cols) + GAP * len(cols)  # the bar's own gap included

    bar = min(BAR_MAX, width - used(columns))
    if bar >= BAR_MIN:
        return columns, bar
    samples = next(col for col in columns if col.title == "samples")
    if used(columns) > width:
        columns.remove(samples)
    name = columns[0]
    over = used(columns) - width + GAP  # + GAP: the last column needs no gap after it
    if over > 0:
        room = max(NAME_MIN, name.width - over)
        columns[0] = _Column(name.title, name.justify, [shorten(c, room) for c in name.cells])
    return columns, 0


def live_table(snap: RunSnapshot, width: int) -> RenderableType:
    """The header line and one row per dataset, in `width` columns."""
    columns, bar = fit(snap.datasets, width)
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, GAP, 0, 0))
    for column in columns[:3]:
        table.add_column(column.title, justify=column.justify, no_wrap=True, min_width=column.width)
    if bar:
        table.add_column("", no_wrap=True, width=bar)
    for column in columns[3:]:
        table.add_column(column.title, justify=column.justify, no_wrap=True, min_width=column.width)
    for row, d in enumerate(snap.datasets):
        cells: list[RenderableType] = [col.cells[row] for col in columns[:3]]
        if bar:
            cells.append(ProgressBar(total=1.0, completed=d.fraction or 0.0, width=bar))
        cells += [col.cells[row] for col in columns[3:]]
        table.add_row(*cells)
    servers = [
        Text(
            server_text(
                url,
                state,
                snap.server_metrics.get(url),
                detail=False,
                workers=snap.server_workers.get(url),
            ),
            overflow="fold",
        )
        for url, state in snap.servers.items()
        if url in snap.server_metrics or state != "ok"
    ]
    return Group(Text(_header(snap), style="bold", overflow="fold"), *servers, table)


def _header(snap: RunSnapshot) -> str:
    return (
        f"{format_count(snap.tokens)} tok  {format_count(snap.tok_s)} tok/s  "
        f"{snap.inflight}/{snap.concurrency} in flight  {snap.utilisation * 100:.0f}% busy"
        f"  {format_duration(snap.elapsed_s)}"
        + (f"  spent {format_dollars(snap.cost)}" if snap.cost is not None else "")
        + ("  [stopping: Ctrl-C again aborts]" if snap.stopping else "")
    )
