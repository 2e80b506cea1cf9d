"""Formatting shared by the widgets and the headless display.

It lives with the widgets because they need it and must not import the app; the headless
display (`gen_tui.app.headless`) imports it from here.
"""

from __future__ import annotations

from gen_tui.backends.snapshot import DatasetSnapshot


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def format_dollars(amount: float) -> str:
    """`$0.042`, `$12.30`, `$1,234`: cents matter below a hundred dollars, not above."""
    if amount < 1:
        return f"${amount:.3f}"
    if amount < 100:
        return f"${amount:.2f}"
    return f"${amount:,.0f}"


def cost_text(snap: DatasetSnapshot) -> str:
    """`$12.30 → $86.20`: spent, then projected at the budget when it can be projected."""
    if snap.cost is None:
        return ""
    text = format_dollars(snap.cost)
    if snap.projected_cost is not None and not snap.state.finished:
        text += f" → {format_dollars(snap.projected_cost)}"
    return text
