"""Formatting shared by the widgets and the headless display.

It lives with the widgets because they need it and must not import the app; the headless
display (`gen_tui.app.headless`) imports it from here.
"""

from __future__ import annotations

from gen_tui.backends.counts import format_dollars, format_duration
from gen_tui.backends.snapshot import DatasetSnapshot

__all__ = ["cost_text", "format_dollars", "format_duration"]


def cost_text(snap: DatasetSnapshot) -> str:
    """`$12.30 → $86.20`: spent, then projected at the budget when it can be projected."""
    if snap.cost is None:
        return ""
    text = format_dollars(snap.cost)
    if snap.projected_cost is not None and not snap.state.finished:
        text += f" → {format_dollars(snap.projected_cost)}"
    return text
