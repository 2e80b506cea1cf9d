"""A dataset's tokens and samples per second: one rule for the engine's own datasets
(`DatasetRun`) and the watched ones (`HostMonitor`).

Plain arithmetic over successive totals, no clock of its own: the caller says when.
"""

from __future__ import annotations

from collections import deque

__all__ = ["MIN_STEPS", "WINDOW_S", "RateMeter"]

WINDOW_S = 30.0
"""The watched panels' window (`HostMonitor`); a `gen-tui run`'s own is 60 s
(`engine.dataset.RATE_WINDOW_S`)."""

MIN_STEPS = 4
"""The fewest growths of the totals (records written, about) the window keeps: it stretches
past its `window_s` until it holds this many. Why: the demo's B9 writes one ~3k-token
record a minute, and over a bare 30 s window its panel's rate jumped between 0 and ~101
tok/s (the engine's 60 s window: 0, 50 or 100) while its server said a steady 50."""


class RateMeter:
    """Tokens and samples per second over a sliding window, from successive totals.

    The window covers the last `window_s`, stretched back to hold at least `min_steps`
    growths of the totals. The rate is what came after the window's first growth, over the
    time from it to the last one: a slow writer's steps are measured from step to step, not
    from an arbitrary edge that one step falls in or out of. Past one mean step without a
    new one, the time since counts too, so a writer that stops decays; with `stops`, past
    two mean steps and `window_s` its rate is 0 (the engine's datasets; the watched panels'
    decays, as it always has, and `producing_rates` says 0 for a stopped dataset). A fast
    writer grows at every reading: its window is `window_s`, and a change of rate shows
    within it.
    """

    def __init__(
        self, window_s: float = WINDOW_S, min_steps: int = MIN_STEPS, stops: bool = False
    ) -> None:
        self.window_s = window_s
        self.min_steps = min_steps
        self.stops = stops
        self._points: deque[tuple[float, int, int]] = deque()
        self._steps = 0
        """How many consecutive pairs of `_points` grew in tokens."""
        self._last_step_at = 0.0
        self.last_tok_s = 0.0
        """The window's tok/s when tokens last came in: what the dataset did while it
        produced, kept once it stops (the `r` preview's estimate for a stopped dataset)."""

    def add(self, at: float, tokens: int, samples: int) -> None:
        """The totals as read at `at` (the same totals again are a reading too)."""
        points = self._points
        if points and tokens < points[-1][1]:  # a file replaced or truncated: start over
            points.clear()
            self._steps = 0
        grew = bool(points) and tokens > points[-1][1]
        points.append((at, tokens, samples))
        if grew:
            self._steps += 1
            self._last_step_at = at
        while len(points) > 2 and at - points[1][0] >= self.window_s:
            first_grew = points[1][1] > points[0][1]
            if self._steps - first_grew < self.min_steps:
                break  # the window stretches: it keeps min_steps growths
            points.popleft()
            self._steps -= first_grew
        if grew:
            self.last_tok_s = self.rates(at)[0]

    def rates(self, now: float) -> tuple[float, float]:
        """(tokens/s, samples/s) at `now`."""
        points = self._points
        if len(points) < 2:
            return 0.0, 0.0
        first, last = points[0], points[-1]
        now = max(now, last[0])
        start = next(point for point in points if point[1] > first[1]) if self._steps else first
        steps = self._steps - 1  # the growths after the first one's point
        # The mean step: from growth to growth, or with one growth the time it took.
        stepped = self._last_step_at - start[0]
        mean = stepped / steps if steps >= 1 else self._last_step_at - first[0]
        if self.stops and self._steps and now - self._last_step_at > max(self.window_s, 2 * mean):
            return 0.0, 0.0  # stopped: nothing for two mean steps and the whole window
        if steps < 1:
            # One growth (or none): from the window's edge, the time since included.
            span = now - first[0]
            if span <= 0:
                return 0.0, 0.0
            return (last[1] - first[1]) / span, (last[2] - first[2]) / span
        # A step late by more than the mean one: the time since counts (a stop decays).
        span = max(stepped, now - start[0] - mean)
        if span <= 0:
            return 0.0, 0.0
        return (last[1] - start[1]) / span, (last[2] - start[2]) / span
