"""The GPUs of a box as the remote watcher reads them from nvidia-smi, and their recent past.

The watcher (stdlib only, on the box) sends each GPU's fields as numbers or null; this
module types them (a field of a wrong type reads as unknown, a name is untrusted text) and
keeps a short history per GPU, as nvitop shows it: a bar says "now", the history says
whether "now" is a dip or a plateau.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.bounds import CELSIUS, GPU_INDEX, MEBIBYTES, PERCENT, WATTS
from gen_tui.backends.untrusted import one_line

__all__ = ["HISTORY", "MAX_GPUS", "Gpu", "GpuBoard", "parse_gpus"]

HISTORY = 30
"""Samples kept per GPU: a minute at the watcher's 2 s telemetry."""
MAX_GPUS = 64
"""GPUs read of one box: more than any box has, few enough to bound what a broken one sends."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU now; None where nvidia-smi does not say ("[N/A]")."""

    index: int
    name: str
    util: float | None = None
    """Percent of the last sample period a kernel ran, 0..100."""
    mem_used: float | None = None
    """MiB."""
    mem_total: float | None = None
    power: float | None = None
    """W."""
    temp: float | None = None
    """°C."""

    @property
    def mem_fraction(self) -> float | None:
        if self.mem_used is None or not self.mem_total:
            return None
        return min(1.0, max(0.0, self.mem_used / self.mem_total))


def parse_gpus(rows: Any) -> tuple[Gpu, ...]:
    """The GPUs of a watcher `gpus` line (its `gpus` list): rows of another shape, or whose
    index is no GPU's, are left out; a field out of its range (nvidia-smi printing 1e308, a
    broken driver) reads as unknown, shown "?", never as a 300-digit figure."""
    if not isinstance(rows, list):
        return ()
    gpus = []
    for row in rows[:MAX_GPUS]:
        if not isinstance(row, dict):
            continue
        index = row.get("index")
        if not isinstance(index, int) or GPU_INDEX.check(index) is None:
            continue
        name = row.get("name")
        gpus.append(
            Gpu(
                index=index,
                name=one_line(name, 60) if isinstance(name, str) else "",
                util=PERCENT.check(row.get("util")),
                mem_used=MEBIBYTES.check(row.get("mem_used")),
                mem_total=MEBIBYTES.check(row.get("mem_total")),
                power=WATTS.check(row.get("power")),
                temp=CELSIUS.check(row.get("temp")),
            )
        )
    return tuple(gpus)


class GpuBoard:
    """A box's GPUs now and each one's recent utilisation and memory use (0..1 each).

    Written by a host link's thread and read by the UI's: every add replaces the published
    objects whole (tuples in a new dict), so a reader never sees one half-updated.
    """

    def __init__(self) -> None:
        self.gpus: tuple[Gpu, ...] = ()
        self._history: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}

    def add(self, gpus: Iterable[Gpu]) -> None:
        current = tuple(gpus)
        history = {}
        for gpu in current:
            util, memory = self._history.get(gpu.index, ((), ()))
            if gpu.util is not None:
                util = (*util, gpu.util / 100)[-HISTORY:]
            if (fraction := gpu.mem_fraction) is not None:
                memory = (*memory, fraction)[-HISTORY:]
            history[gpu.index] = (util, memory)
        self._history = history
        self.gpus = current

    def history(self, index: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(utilisation, memory) of GPU `index`, oldest first."""
        return self._history.get(index, ((), ()))
