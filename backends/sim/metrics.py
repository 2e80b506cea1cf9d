"""`GET /metrics` on the simulator: its load in SGLang's (or vLLM's) Prometheus names.

What a real server would report is computed from the simulated batch at the moment of the
read: the running and queued requests (the slots' own counts, those /_sim/stats reports:
issue 31, point 7), the KV cache their prompts and tokens so far fill, the decode rate of
the requests generating (measured over the last few seconds instead, as SGLang's
`gen_throughput` is over its logging interval, whenever this process runs behind its
schedule: then the slots' nominal speed is not what the clients receive), and the counters
of tokens generated and requests retracted. Rendered by `prometheus_client` itself, with
SGLang 0.5.23's labels
(the scheduler's per rank: `model_name`, `engine_type`, `tp_rank`, `pp_rank`,
`moe_ep_rank`; the tokenizer's token counter: `model_name`, `engine_type`,
`is_streaming`), so a client parses what it would parse from SGLang started with
`--enable-metrics`; tests/integration/test_real_sglang_metrics.py compares the two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gen_tui.backends.sim.config import SimConfig

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

    from gen_tui.backends.sim.pipeline import Simulator

__all__ = ["SimLoad", "kv_capacity", "load", "metrics_handler"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LAG_S = 0.1
"""How late past its schedule a request may still hold its slot before the simulator counts
itself behind (an event loop's ordinary delay is milliseconds)."""


def kv_capacity(config: SimConfig) -> int:
    """The tokens the simulated KV cache holds (SGLang's `max_total_num_tokens`)."""
    return config.kv_tokens or config.slots * config.context_length


class SimLoad:
    """The simulator's load at one moment, in the quantities both servers report."""

    def __init__(self, sim: Simulator, now: float) -> None:
        config = sim.config
        jobs = [job for peers in sim.jobs.values() for job in peers]
        running = [job for job in jobs if job.state == "running"]
        self.running = sim.stats.in_flight
        self.queued = sim.stats.queued
        produced = [job.produced(now) for job in running]
        self.used_tokens = sum(
            job.prompt.prompt_tokens + done for job, done in zip(running, produced, strict=True)
        )
        self.capacity = kv_capacity(config)
        self.generated = sim.stats.generated_tokens + sum(produced)
        measured = sim.throughput.rate(now, self.generated)
        # A request still in its slot LAG_S past its last token's time means this process
        # is behind its own schedule (a machine that cannot serve what the slots offer):
        # then the counter's rise is the truth, never the slots' nominal speed (which said
        # 1.1M tok/s beside 318k generated, and 0 while every stream ran late).
        late = any(
            now - (job.decode_start + len(job.output_ids) / job.tokens_per_s) > LAG_S
            for job in running
        )
        nominal = sum(
            job.tokens_per_s
            for job, done in zip(running, produced, strict=True)
            if job.decode_start <= now and done < len(job.output_ids)
        )
        self.gen_tok_s = measured if late or config.measured_throughput else nominal
        self.retracted = sim.stats.retracted


def load(sim: Simulator) -> SimLoad:
    return SimLoad(sim, asyncio.get_running_loop().time())


Series = tuple[tuple[str, str, float], ...]
"""(name without prefix, documentation, value) of each series."""


def _families(
    prefix: str, labels: dict[str, str], gauges: Series, counters: Series = ()
) -> Iterator[Metric]:
    """One family a series, one sample each, named `prefix:name` as the server names it."""
    for kind, series in ((GaugeMetricFamily, gauges), (CounterMetricFamily, counters)):
        for name, documentation, value in series:
            family = kind(f"{prefix}:{name}", documentation, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            yield family


class _SglangNames(Collector):
    """SGLang's metrics (srt/observability/metrics_collector.py): one scheduler rank's, and
    the tokenizer's token counter."""

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim

    def collect(self) -> Iterator[Metric]:
        now = load(self._sim)
        model = {"model_name": self._sim.config.model_path, "engine_type": "unified"}
        rank = {**model, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        gauges = (
            ("num_running_reqs", "The number of running requests.", now.running),
            ("num_queue_reqs", "The number of requests in the waiting queue.", now.queued),
            ("num_used_tokens", "The number of used tokens.", now.used_tokens),
            ("token_usage", "The token usage.", now.used_tokens / now.capacity),
            ("max_total_num_tokens", "Maximum total number of tokens.", now.capacity),
            ("gen_throughput", "The generation throughput (token/s).", now.gen_tok_s),
            ("cache_hit_rate", "The prefix cache hit rate.", self._sim.prefix_cache.hit_rate),
            ("num_retracted_reqs", "The number of retracted requests.", 0),  # (per step)
        )
        retracted = ("num_retracted_requests", "Total number of retracted requests.", now.retracted)
        yield from _families("sglang", rank, gauges, (retracted,))
        generated = ("generation_tokens", "Number of generation tokens processed.", now.generated)
        yield from _families("sglang", {**model, "is_streaming": "false"}, (), (generated,))


class _VllmNames(Collector):
    """vLLM's engine metrics (v1): no throughput gauge, preemptions for retractions."""

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim

    def collect(self) -> Iterator[Metric]:
        now = load(self._sim)
        labels = {"model_name": self._sim.config.model_name, "engine": "0"}
        gauges = (
            ("num_requests_running", "Number of requests in model execution batches.", now.running),
            ("num_requests_waiting", "Number of requests waiting to be processed.", now.queued),
            ("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
             now.used_tokens / now.capacity),
        )  # fmt: skip
        counters = (
            ("generation_tokens", "Number of generation tokens processed.", now.generated),
            ("num_preemptions", "Cumulative number of preemption from the engine.", now.retracted),
        )
        yield from _families("vllm", labels, gauges, counters)


def metrics_handler(sim: Simulator) -> Handler:
    """The /metrics endpoint: rendered afresh at each read, 404 when `metrics` is off."""
    registries = {}
    for name, collector in (("sglang", _SglangNames), ("vllm", _VllmNames)):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector(sim))
        registries[name] = registry

    async def handle(_request: web.Request) -> web.Response:
        registry = registries.get(sim.config.metrics)
        if registry is None:
            raise web.HTTPNotFound()
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})

    return handle
