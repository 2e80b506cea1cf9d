"""The cost meter: what answers cost, and whether `max_cost` leaves room for one more.

A server may report a cost per answer (OpenRouter's usage.cost); otherwise a configured
price per million tokens gives one; otherwise nothing is priced and nothing is shown.
"""

from __future__ import annotations

from gen_tui.backends.clients.results import Generation
from gen_tui.backends.config.run import EngineConfig
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.progress.snapshot import DatasetState


class CostMeter:
    """Prices answers and checks the run's spend against `config.max_cost`."""

    def __init__(self, config: EngineConfig, datasets: list[DatasetRun]) -> None:
        self.config = config
        self.datasets = datasets

    def price(self, gen: Generation) -> float | None:
        if gen.cost is not None:
            return gen.cost
        if self.config.price_per_million is None:
            return None
        per_in, per_out = self.config.price_per_million
        return (gen.prompt_tokens * per_in + gen.completion_tokens * per_out) / 1e6

    def total(self) -> float:
        return sum(ds.cost for ds in self.datasets)

    def exhausted(self, inflight: int) -> bool:
        """Whether `max_cost` leaves no room for one more request at the current mean cost."""
        limit = self.config.max_cost
        if limit is None:
            return False
        spent = self.total()
        done = sum(ds.samples - ds.resumed_samples for ds in self.datasets)
        per_request = spent / done if done else 0.0
        return spent + (inflight + 1) * per_request >= limit

    @staticmethod
    def fields(ds: DatasetRun, now: float) -> dict[str, float | None]:
        """Spent, $/hour over the run so far, and the projected cost at the token budget."""
        if not ds.priced:
            return {}
        hours = (now - ds.first_record_mono) / 3600 if ds.first_record_mono else 0.0
        new_tokens = ds.tokens - ds.resumed_tokens
        projected = None
        if ds.budget.max_tokens is not None and new_tokens > 0:
            remaining = max(0, ds.budget.max_tokens - ds.tokens)
            projected = ds.cost + remaining * ds.cost / new_tokens
        return {
            "cost": ds.cost,
            "cost_per_hour": ds.cost / hours if hours > 0 else None,
            "projected_cost": projected,
        }

    def finish(self, reporter: Reporter) -> None:
        """End every unfinished dataset: the money is spent."""
        spent = self.total()
        for ds in self.datasets:
            if not ds.state.finished:
                ds.state = DatasetState.DONE
                ds.message = f"cost budget reached: ${spent:.2f} of ${self.config.max_cost:g}"
        reporter.event("budget", f"cost budget reached: ${spent:.2f} spent")
