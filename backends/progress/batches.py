"""A dataset's batches in flight, as progress.json and the panel carry them.

The batch lane (`--api openai-batch`) writes one `BatchView` per batch it polls: what the
provider said of it (status, its completed/failed/total counts, created and expiry times),
from which the age against the provider's window and an ETA from its progress follow.
The file crosses hosts and versions, so the reader takes each entry field by field and
leaves out what has the wrong type; the count is bounded (a hostile file could list 1e6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.figures import counted, format_duration
from gen_tui.backends.untrusted import one_line

BATCH_WINDOW_S = 24 * 3600.0
"""The Batch contract's completion window (`24h`): a batch that names no expiry has it."""
MAX_BATCHES = 16
"""The most batches written to (or read from) one progress.json: some 350 bytes each, they
stay well within what the watcher reads of the file (PROGRESS_MAX_BYTES, 32 KiB) beside the
quality figures; a run with more out (`--batch-in-flight` over 16) lists its first 16."""
BATCH_COUNTS_SAID = "requests done"
"""How the batch lane's message line (its counts, for the plain output) ends: a panel that
shows `batches` leaves that message out, as the batches line says it and more."""
ID_CHARS = 80
"""A batch id is shown and carried at most this long (OpenAI's are ~30)."""
STATUS_CHARS = 40
"""A batch status is shown and carried at most this long (`in_progress` is 11)."""


@dataclass(frozen=True, slots=True)
class BatchView:
    """One batch in flight as the provider last said it."""

    id: str
    status: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    created_at: float | None = None
    """The provider's creation time (epoch seconds); None until it is created."""
    expires_at: float | None = None
    in_progress_at: float | None = None
    """When it began to run, after `validating` (None: not yet, or not said)."""

    @property
    def window_s(self) -> float:
        """The batch's whole window: its expiry less its creation, else the contract's 24 h."""
        if self.created_at is not None and self.expires_at is not None:
            span = self.expires_at - self.created_at
            if span > 0:
                return span
        return BATCH_WINDOW_S

    def age_s(self, now: float) -> float | None:
        """Seconds since the provider created it (None: not created yet)."""
        if self.created_at is None:
            return None
        return max(0.0, now - self.created_at)

    def eta_s(self, now: float) -> float | None:
        """Seconds until its last line, at the pace the provider's counts show so far (None
        while it has no line done, or none left): lines done over the time it has run
        (since `in_progress`, else since created), the rest at that pace."""
        start = self.in_progress_at if self.in_progress_at is not None else self.created_at
        done = self.completed + self.failed
        if start is None or done <= 0 or self.total <= done:
            return None
        running = now - start
        if running <= 0:
            return None
        return running * (self.total - done) / done

    def to_json(self, now: float) -> dict[str, Any]:
        """Its fields, and the age, window and ETA at `now` for readers that only show."""
        return {
            "id": self.id,
            "status": self.status,
            "completed": self.completed,
            "failed": self.failed,
            "total": self.total,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "in_progress_at": self.in_progress_at,
            "age_s": self.age_s(now),
            "window_s": self.window_s,
            "eta_s": self.eta_s(now),
        }

    def shown(self) -> BatchView:
        """What a panel and progress.json carry of it: the provider's id and status are
        its words (untrusted: cleaned and cut as :meth:`parse` cleans a file's), a
        `BatchState`'s files and metadata left out. The lane keeps the raw id to poll."""
        return BatchView(
            id=shown_id(self.id),
            status=shown_status(self.status),
            completed=self.completed,
            failed=self.failed,
            total=self.total,
            created_at=self.created_at,
            expires_at=self.expires_at,
            in_progress_at=self.in_progress_at,
        )

    @classmethod
    def parse(cls, value: Any) -> BatchView | None:
        """One entry of progress.json's `batches`; None when it has no id or status."""
        if not isinstance(value, dict):
            return None
        batch_id, status = value.get("id"), value.get("status")
        if not isinstance(batch_id, str) or not isinstance(status, str) or not batch_id:
            return None

        def count(name: str) -> int:
            field = value.get(name)
            if isinstance(field, bool) or not isinstance(field, int):
                return 0
            return field if 0 <= field < 1 << 40 else 0

        def moment(name: str) -> float | None:
            field = value.get(name)
            if isinstance(field, bool) or not isinstance(field, (int, float)):
                return None
            return float(field) if 0 <= field < 1e11 else None

        return cls(
            id=shown_id(batch_id),
            status=shown_status(status),
            completed=count("completed"),
            failed=count("failed"),
            total=count("total"),
            created_at=moment("created_at"),
            expires_at=moment("expires_at"),
            in_progress_at=moment("in_progress_at"),
        )


def shown_id(batch_id: str) -> str:
    """A provider's batch id as shown: one line, control characters visible, cut."""
    return one_line(batch_id, ID_CHARS)


def shown_status(status: str) -> str:
    """A provider's batch status as shown (its known ones are a word: `in_progress`)."""
    return one_line(status, STATUS_CHARS)


def parse_batches(value: Any) -> tuple[BatchView, ...] | None:
    """progress.json's `batches`: None when absent or not a list; entries of another shape
    are left out."""
    if not isinstance(value, list):
        return None
    views = (BatchView.parse(item) for item in value[:MAX_BATCHES])
    return tuple(view for view in views if view is not None)


def batches_line(batches: Sequence[BatchView], now: float) -> str:
    """`3 batches: in_progress 1,200/5,000 · 2h of 24h · ETA 40m`: the batches' statuses
    with the provider's counts summed, the oldest one's age against its window, and the
    latest ETA among them; "" when there is none."""
    if not batches:
        return ""
    statuses = sorted({b.status for b in batches})
    done = sum(b.completed for b in batches)
    total = sum(b.total for b in batches)
    failed = sum(b.failed for b in batches)
    text = f"{counted(len(batches), 'batch')}: {'/'.join(statuses)} {done:,}/{total:,}"
    if failed:
        text += f" ({failed:,} failed)"
    ages = [(age, b.window_s) for b in batches if (age := b.age_s(now)) is not None]
    if ages:
        age, window = max(ages)
        text += f" · {format_duration(age)} of {span_text(window)}"
    eta = batches_eta(batches, now)
    if eta is not None:
        text += f" · ETA {format_duration(eta)}"
    return text


def batches_eta(batches: Sequence[BatchView], now: float) -> float | None:
    """When the last of `batches` is done at the provider's pace (None: no batch has a
    line done yet). A batch run's token rate comes in bursts, a batch at a time: its
    average says nothing of when the batches out now end."""
    etas = [eta for b in batches if (eta := b.eta_s(now)) is not None]
    return max(etas) if etas else None


def span_text(seconds: float) -> str:
    """A window as providers name it: `24h` (whole hours), else as any duration."""
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h" if hours and not rest else format_duration(seconds)


def cancel_note(batches: Sequence[BatchView]) -> str:
    """What a kill does to a run's batches in flight, for its confirmation: cancelled at
    the provider, which bills the lines each finished before the cancel (those are
    downloaded and kept); "" when it has none."""
    if not batches:
        return ""
    done = sum(b.completed for b in batches)
    total = sum(b.total for b in batches)
    return (
        f"Its {counted(len(batches), 'batch')} in flight ({done:,} of {total:,} requests "
        "done) are cancelled at the provider. The provider bills the requests each finished "
        "before the cancel (at the batch price); those are downloaded and kept, the rest "
        "are sent again by the next run. A second kill leaves the batches open for the "
        "next run to collect."
    )
