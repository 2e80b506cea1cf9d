"""What can go wrong with a run on a host, as exceptions whose message a person reads."""

from __future__ import annotations


class RunError(Exception):
    """Something about a run that a person must read: the message says what and why."""


class ResumeRefused(RunError):
    """Starting would make a second writer (or repeat a live run): nothing was started."""

    @classmethod
    def raced(cls, host: str) -> ResumeRefused:
        """The start guard found a start that came after the check this one relied on."""
        return cls(
            f"{host}: another start reached the output folder after the check for a live "
            "writer that this one relied on (a second start at the same time, or a late "
            "request from a lost link); nothing was started: list the runs before starting "
            "again"
        )


class StartError(RunError):
    """The command could not be launched, or exited at once (the message holds its log)."""
