"""The data-quality view of one dataset, as text: finish reasons, lengths, latency, errors.

Plain functions from a snapshot to Rich `Text` (never markup: the reasons are a server's
words), so the screen that shows it stays thin and the tests read what a person would.
Sized for 80x24: the length histogram keeps only the buckets from the first to the last
that has answers.
"""

from __future__ import annotations

from rich.text import Text

from gen_tui.backends.budget.rules import runs_out_at
from gen_tui.backends.figures import counted, format_count
from gen_tui.backends.progress import truncation
from gen_tui.backends.progress.quality import Quality, length_label
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.untrusted import one_line

BAR = "█"
PARTS = " ▏▎▍▌▋▊▉"
LABEL_WIDTH = 10
CUT_STYLE = "bold black on yellow"


def bar(value: int, top: int, width: int) -> str:
    """A horizontal bar of `value` out of `top` in `width` cells, in eighths of a cell."""
    if top <= 0 or width <= 0:
        return ""
    eighths = round(value / top * width * 8)
    if value > 0 and eighths == 0:
        eighths = 1
    full, part = divmod(eighths, 8)
    return (BAR * full + (PARTS[part] if part else "")).ljust(width)


def percent(part: int, whole: int) -> str:
    if not whole:
        return "-"
    share = part * 100 / whole
    return f"{share:.0f}%" if share >= 10 or share == 0 else f"{share:.1f}%"


def finish_text(snap: DatasetSnapshot, quality: Quality) -> Text:
    """`stop 1,100 (89%)  length 120 (9.7%)`: this run's reasons, the cut one highlighted
    when the file's share is past the warning."""
    text = Text("Finish    ", style="bold")
    over = truncation.over(snap.truncated, snap.truncated_of, snap.truncated_warn)
    for reason, count in quality.finish:
        piece = f"{reason} {count:,} ({percent(count, quality.answers)})"
        cut = reason == truncation.CUT
        text.append(piece, style=CUT_STYLE if cut and over else ("yellow" if cut else ""))
        text.append("  ")
    return text


def cut_text(snap: DatasetSnapshot) -> Text | None:
    """`Cut  300 of 1,000 in the file (30%)`: the share of answers cut at their cap over
    every record (a resumed run's earlier ones, a foreign script's), not this run's alone:
    the share the training data has. None before any record."""
    if not snap.truncated_of:
        return None
    over = truncation.over(snap.truncated, snap.truncated_of, snap.truncated_warn)
    text = Text("Cut       ", style="bold").append(
        f"{snap.truncated:,} of {snap.truncated_of:,} in the file "
        f"({percent(snap.truncated, snap.truncated_of)})",
        style=CUT_STYLE if over else ("yellow" if snap.truncated else ""),
    )
    if over:
        text.append(f": over the {snap.truncated_warn:g}% warning, raise --max-new-tokens")
    return text


def histogram(quality: Quality, width: int) -> list[Text]:
    """One row per length bucket from the first to the last with answers."""
    counts = quality.lengths
    used = [i for i, count in enumerate(counts) if count]
    if not used:
        return []
    top = max(counts)
    bar_width = max(4, width - LABEL_WIDTH - 12)
    rows = []
    for index in range(used[0], used[-1] + 1):
        count = counts[index]
        row = Text(f"  {length_label(index):<{LABEL_WIDTH - 2}}")
        row.append(bar(count, top, bar_width), style="green")
        row.append(f" {count:,}")
        rows.append(row)
    return rows


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def forecast_text(snap: DatasetSnapshot) -> str:
    """ "runs out of prompts at ~3.1M of its 5M budget" (or the prompts left), else ""."""
    mean = snap.mean_tokens
    end = runs_out_at(snap.tokens, snap.max_tokens, snap.prompts_left, mean)
    if end is not None and snap.max_tokens is not None:
        return (
            f"runs out of prompts at ~{format_count(end)} of its "
            f"{format_count(snap.max_tokens)} budget ({snap.prompts_left:,} left)"
        )
    if snap.prompts_left is not None:
        return f"{snap.prompts_left:,} prompts left"
    return ""


def quality_text(snap: DatasetSnapshot | None, width: int = 78) -> Text:
    """The whole view for one dataset (what the `d` screen shows)."""
    if snap is None:
        return Text("Nothing known about this dataset yet.")
    quality = snap.quality
    lines: list[Text] = []
    if quality is None:
        lines.append(
            Text(
                "No quality figures: the process writing this dataset does not publish them "
                "(a gen-tui run does, in progress.json). Mean length "
                f"{format_count(round(snap.mean_tokens)) if snap.mean_tokens else '-'} tokens."
            )
        )
    else:
        answers = counted(quality.answers, "answer")
        lines.append(
            Text(f"{answers} this run · mean length ", style="bold").append(
                f"{format_count(round(snap.mean_tokens)) if snap.mean_tokens else '-'} tokens"
            )
        )
        lines.append(finish_text(snap, quality))
        lines.append(Text("Lengths   tokens per answer", style="bold"))
        lines.extend(histogram(quality, width) or [Text("  no answers yet")])
        lines.append(
            Text("Latency   ", style="bold").append(
                f"p50 {seconds(quality.latency_quantile(0.5))}   "
                f"p99 {seconds(quality.latency_quantile(0.99))}"
            )
        )
        errors = Text("Errors    ", style="bold").append(f"{snap.errors:,} given up")
        lines.append(errors)
        for reason, count in quality.errors:
            lines.append(Text(f"  {count:>7,} × {one_line(reason, width - 14)}"))
    cut = cut_text(snap)
    if cut is not None:
        lines.insert(1, cut)
    outlook = forecast_text(snap)
    if outlook:
        lines.append(Text("Prompts   ", style="bold").append(outlook))
    return Text("\n").join(lines)
