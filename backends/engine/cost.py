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
    """Prices answers and checks the run's spend against its cap, `max_cost`."""

    def __init__(self, config: EngineConfig, datasets: list[DatasetRun]) -> None:
        self.config = config
        self.datasets = datasets
        self.max_cost = config.max_cost
        """The spend cap now: `--max-cost`, or as the panel or a control file set it while
        a planned run goes (backends/engine/fleet.py `retarget`)."""
        self.lane_prices = {lane.url: lane.price_per_million for lane in config.fleet}
        """Each lane's own price (a free lane's is zero): a mixed fleet prices per server."""

    def price(self, gen: Generation, server: str | None = None) -> float | None:
        if gen.cost is not None:
            return gen.cost
        prices = self.lane_prices.get(server) if server is not None else None
        if prices is None:
            prices = self.config.price_per_million
        if prices is None:
            return None
        per_in, per_out = prices
        return (gen.prompt_tokens * per_in + gen.completion_tokens * per_out) / 1e6

    def total(self) -> float:
        return sum(ds.cost for ds in self.datasets)

    def exhausted(self, inflight: int) -> bool:
        """Whether `max_cost` leaves no room for one more request at the current mean cost."""
        limit = self.max_cost
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
                ds.message = f"cost budget reached: ${spent:.2f} of ${self.max_cost:g}"
        reporter.event("budget", f"cost budget reached: ${spent:.2f} spent")
