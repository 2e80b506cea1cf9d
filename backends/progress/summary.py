"""What a run did, in the one line that ends it: `gen-tui run`'s last line, the panel's event
log when a run of this process ends, and the alert sent then all say the same words.
"""

from __future__ import annotations

from gen_tui.backends.budget.rules import overshoot
from gen_tui.backends.figures import format_duration
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot


def _over(tokens: int, budget: int | None) -> str:
    fraction = overshoot(tokens, budget)
    return "" if fraction is None else f" ({fraction * 100:+.3f}%)"


def summary_line(snap: RunSnapshot) -> str:
    """What the run did, for its last line: per dataset where it ended against its budget,
    the total against a total budget, and how full the pool kept the server."""
    parts = []
    for d in snap.datasets:
        budget = f"/{d.max_tokens:,}" if d.max_tokens is not None else ""
        over = _over(d.tokens, d.max_tokens) if d.state is DatasetState.DONE else ""
        parts.append(f"{d.name} {d.state} {d.tokens:,}{budget}{over}")
    total = f"{snap.tokens:,}"
    if snap.max_total_tokens:
        total += f"/{snap.max_total_tokens:,}{_over(snap.tokens, snap.max_total_tokens)}"
    if snap.active_s > 0:
        took = f"{format_duration(snap.active_s)}, pool utilisation {snap.utilisation * 100:.1f}%"
    else:  # the pool sent nothing (a batch lane alone): "in 0s, pool utilisation 0.0%" was
        # said of a run of minutes
        took = f"{format_duration(snap.elapsed_s)}, no live requests"
    return f"summary: {total} tokens in {took}; " + "; ".join(parts)
