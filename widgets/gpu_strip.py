"""The GPUs of the watched boxes: per GPU its utilisation and memory as bars, with a short
history, as nvitop shows them.

Eight GPUs fit one 80-column line in the compact form (each GPU: its index, utilisation %
and two one-cell bars, utilisation then memory); a tall terminal gives each GPU a line with
wide bars, the recent utilisation as a sparkline, memory in GiB, power and temperature.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gen_tui.backends.telemetry.gpus import Gpu

LEVELS = "▁▂▃▄▅▆▇█"
"""A fraction 0..1 as one cell, by height (the lowest still drawn: idle is seen, not blank)."""
EIGHTHS = " ▏▎▍▌▋▊▉"
"""The end of a horizontal bar, by eighths of a cell."""
TALL_LINES = 8
"""The most GPU lines in the tall form (one box of 8 GPUs; more: the compact line)."""
BAR = 10


@dataclass(frozen=True)
class GpuLine:
    """One GPU as the strip shows it: its host, its state now and its recent past."""

    host: str
    gpu: Gpu
    util_history: tuple[float, ...] = ()
    """Utilisation 0..1, oldest first."""
    this_machine: bool = False
    """Read on the machine gen-tui runs on (a watched local host): the same devices as
    what this process's runs read, which are then not shown twice."""


def level(fraction: float | None) -> str:
    if fraction is None:
        return "?"
    return LEVELS[round(min(1.0, max(0.0, fraction)) * (len(LEVELS) - 1))]


def bar(fraction: float | None, width: int = BAR) -> str:
    """`fraction` as a bar of `width` cells, eighths at its end."""
    if fraction is None:
        return "[" + "?" * width + "]"
    eighths = round(min(1.0, max(0.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    return "[" + ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)[:width] + "]"


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}%"


def compact_line(lines: tuple[GpuLine, ...], width: int) -> str:
    """Every GPU on one line: `GPU util·mem 0 97%▇▆ 1 3%▁▁ ...` (as many as fit)."""
    text = "GPU util·mem"
    hosts = {line.host for line in lines}
    for index, line in enumerate(lines):
        gpu = line.gpu
        name = f"{line.host}:{gpu.index}" if len(hosts) > 1 else str(gpu.index)
        cell = f" {name} {_percent(gpu.util)}{level(_fraction(gpu.util))}{level(gpu.mem_fraction)}"
        rest = len(lines) - index
        if len(text) + len(cell) > width - (len(f" +{rest}") if rest > 1 else 0):
            return text + f" +{rest}"
        text += cell
    return text


def _fraction(util: float | None) -> float | None:
    return None if util is None else util / 100


def tall_line(line: GpuLine) -> str:
    """One GPU in full: `GPU0 H100 util ██████████ 97% ▁▃▇█ mem █████████▏ 73.6/79.6G 612W 71°C`."""
    gpu = line.gpu
    spark = "".join(level(value) for value in line.util_history[-12:])
    memory = "?"
    if gpu.mem_used is not None and gpu.mem_total:
        memory = f"{gpu.mem_used / 1024:.1f}/{gpu.mem_total / 1024:.1f}G"
    parts = [
        f"GPU{gpu.index} {gpu.name[:24]}",
        f"util {bar(_fraction(gpu.util))} {_percent(gpu.util):>4} {spark:<12}",
        f"mem {bar(gpu.mem_fraction)} {memory}",
    ]
    if gpu.power is not None:
        parts.append(f"{gpu.power:.0f}W")
    if gpu.temp is not None:
        parts.append(f"{gpu.temp:.0f}°C")
    return "  ".join(parts)


def strip_text(lines: tuple[GpuLine, ...], width: int, *, tall: bool) -> str:
    if not lines:
        return ""
    if tall and len(lines) <= TALL_LINES:
        return "\n".join(tall_line(line) for line in lines)
    return compact_line(lines, width)


class GpuStrip(Widget):
    """The GPUs' load; hidden while no watched box reports a GPU."""

    DEFAULT_CSS = """
    GpuStrip { height: auto; }
    """

    view: reactive[tuple[GpuLine, ...]] = reactive(tuple)
    """Repaints; `show` asks for a layout only when the line count changes (as ServerStrip)."""
    tall: reactive[bool] = reactive(False, layout=True)

    def render(self) -> Text:
        text = strip_text(self.view, self.size.width or 80, tall=self.tall)
        return Text(text, no_wrap=True, overflow="ellipsis")

    @property
    def line_count(self) -> int:
        """The lines it takes above the board (0 while hidden): the layout's to plan for."""
        if not self.view:
            return 0
        return strip_text(self.view, self.size.width or 80, tall=self.tall).count("\n") + 1

    def show(self, lines: tuple[GpuLine, ...], *, tall: bool) -> None:
        if lines != self.view:
            count = self.line_count
            self.view = lines
            if self.line_count != count:
                self.refresh(layout=True)
        if tall != self.tall:
            self.tall = tall
        self.display = bool(lines)
