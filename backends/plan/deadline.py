"""`--deadline`: a time of day (`07:30`, the next one to come) or a duration (`8h`, `90m`,
`2h30m`, `45s`), as seconds from now."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


class DeadlineError(ValueError):
    """A deadline that is neither a time of day nor a duration; the message quotes it and
    says what was expected (the caller puts the flag or key in front)."""


def parse_deadline(text: str, now: datetime | None = None) -> float:
    """Seconds from `now` (local time) to the deadline `text`; raise :class:`DeadlineError`.

    A clock time already past today is tomorrow's (a run started at 23:00 for `07:30`)."""
    spelled = text.strip().lower()
    clock = _CLOCK.fullmatch(spelled)
    if clock is not None:
        hour, minute = int(clock[1]), int(clock[2])
        if hour > 23 or minute > 59:
            raise DeadlineError(f"{text!r}: no such time of day (00:00 to 23:59)")
        now = now or datetime.now()
        due = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if due <= now:
            due += timedelta(days=1)
        return (due - now).total_seconds()
    duration = _DURATION.fullmatch(spelled)
    if spelled and duration is not None and any(duration.groups()):
        hours, minutes, seconds = (float(part or 0) for part in duration.groups())
        total = hours * 3600 + minutes * 60 + seconds
        if total > 0:
            return total
    raise DeadlineError(f"{text!r}: expected a time of day (07:30) or a duration (8h, 90m, 2h30m)")
