"""A server's load from its Prometheus `/metrics`, in one typed shape for SGLang and vLLM.

Both servers speak Prometheus text but name things their own way, and label every series
per rank (SGLang: `tp_rank`, `dp_rank`, ...) or per engine (vLLM): `ServerMetrics` sums
the counts over the series and keeps None where a server does not say, so a panel or the
concurrency control reads one shape whatever answered. Parsing is `prometheus_client`'s
(the format has escapes, exponents, NaN and `_created` twins that a hand parser gets
wrong); the text is untrusted, so it is size-bounded and non-finite values count as
"does not say".

- SGLang (`--enable-metrics`; 0.5.23's srt/observability/metrics_collector.py, whose output
  tests/integration/test_real_sglang_metrics.py reads): per scheduler rank (labels
  `model_name`, `engine_type`, `tp_rank`, `pp_rank`, `moe_ep_rank`, and `dp_rank` under
  data parallelism; only attention-TP rank 0 of each group reports, so summing over the
  series counts each request once), gauges `sglang:num_running_reqs`, `num_queue_reqs`,
  `token_usage` (KV use 0..1: the fullest of its full, sliding-window and Mamba pools),
  `num_used_tokens`, `max_total_num_tokens`, `gen_throughput` (tok/s), `cache_hit_rate`;
  counter `num_retracted_requests_total` (the older gauge `num_retracted_reqs` is per step).
  With `--enable-priority-scheduling` every series also has a `priority` label, and the
  queue gauges repeat their total per priority (`priority="0"`, ...) beside the total
  (`priority=""`): those breakdowns are not counted. The counter
  `sglang:generation_tokens_total` is the tokenizer's, labelled by `is_streaming` and
  the request's priority (parts of one total, so summed), not by rank.
- vLLM (on by default): `vllm:num_requests_running`, `num_requests_waiting`,
  `kv_cache_usage_perc` (0..1 despite the name; `gpu_cache_usage_perc` before 0.10),
  counters `generation_tokens_total`, `num_preemptions_total`, `prefix_cache_hits_total` /
  `prefix_cache_queries_total`. vLLM has no throughput gauge: the rate comes from the counter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gen_tui.backends.bounds import COUNT, FRACTION, RATE, Range
from gen_tui.backends.untrusted import one_line

__all__ = [
    "ENABLE_HINT",
    "METRICS_BYTES",
    "MetricsError",
    "MetricsReader",
    "MetricsUnreachable",
    "ServerMetrics",
    "parse_metrics",
    "read_samples",
]

METRICS_BYTES = 4 << 20
"""The most of a /metrics answer read: SGLang's is some 100 KB (histograms per rank)."""
ENABLE_HINT = "start SGLang with --enable-metrics to see its load here"
"""What to do about a server without /metrics (vLLM serves it unless told not to)."""

Samples = dict[str, list[float]]
"""Each sample name's values, one per labelled series (rank, engine)."""


class MetricsError(ValueError):
    """A /metrics answer that is not Prometheus text (or too big to read)."""


class MetricsUnreachable(MetricsError):
    """No /metrics answer at all: the server refused the connection or was not found (it is
    down, where a slow or odd answer only says its metrics are)."""


@dataclass(frozen=True, slots=True)
class ServerMetrics:
    """One server's load at one moment; None where the server does not say.

    `running`/`queued` are requests, summed over ranks; `kv_usage` the KV cache in use, 0..1
    (used over capacity over all ranks where both are given); `gen_tok_s` the server's
    generation rate (its gauge, else the rate of its token counter between two reads);
    `retracted` the requests it retracted (SGLang) or preempted (vLLM) since it started:
    each is recomputed work, the sign of too many long requests for its KV cache.
    `generation_tokens` is the raw counter the rate is taken from.
    """

    server: str | None = None
    """"sglang" or "vllm": whose names the text used."""
    running: float | None = None
    queued: float | None = None
    kv_usage: float | None = None
    gen_tok_s: float | None = None
    retracted: float | None = None
    cache_hit: float | None = None
    generation_tokens: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields progress.json carries for a server (numbers or null)."""
        return {
            "running": self.running,
            "queued": self.queued,
            "kv_usage": self.kv_usage,
            "gen_tok_s": self.gen_tok_s,
            "retracted": self.retracted,
            "cache_hit": self.cache_hit,
        }

    @classmethod
    def from_json(cls, value: Any) -> ServerMetrics | None:
        """Tolerant reader of `to_json`: a field of the wrong type reads as None."""
        if not isinstance(value, Mapping):
            return None

        return cls(
            running=value.get("running"),
            queued=value.get("queued"),
            kv_usage=value.get("kv_usage"),
            gen_tok_s=value.get("gen_tok_s"),
            retracted=value.get("retracted"),
            cache_hit=value.get("cache_hit"),
        ).bounded()

    def bounded(self) -> ServerMetrics:
        """These figures with each one out of its range (a server's 1e308, a sum gone to
        inf, a field of the wrong type in a file) read as "does not say": the range check
        of every figure a server or a progress.json gives, said once (FIELD_RANGES)."""
        checked: dict[str, Any] = {
            name: bounds.check(getattr(self, name)) for name, bounds in FIELD_RANGES
        }
        return replace(self, **checked)


FIELD_RANGES: tuple[tuple[str, Range], ...] = (
    ("running", COUNT),
    ("queued", COUNT),
    ("kv_usage", FRACTION),
    ("gen_tok_s", RATE),
    ("retracted", COUNT),
    ("cache_hit", FRACTION),
    ("generation_tokens", COUNT),
)
"""Each ServerMetrics figure's range (bounds.py)."""


def read_samples(text: str) -> Samples:
    """Every finite sample of Prometheus `text`, by name, less gauges' per-priority
    breakdowns; MetricsError if it is not that."""
    if len(text) > METRICS_BYTES:
        raise MetricsError(f"more than {METRICS_BYTES >> 20} MB of metrics")
    samples: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if family.type == "gauge" and sample.labels.get("priority"):
                    continue  # SGLang's per-priority breakdown of a total it also gives
                try:
                    value = float(sample.value)
                except OverflowError:  # a 400-digit integer (the parser keeps it whole)
                    continue
                if math.isfinite(value):
                    samples.setdefault(sample.name, []).append(value)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        # The parser raises ValueError on a bad line, and others on some malformed ones.
        raise MetricsError(f"not Prometheus text ({one_line(str(exc), 120)})") from exc
    return samples


def _sum(samples: Samples, *names: str) -> float | None:
    """The sum over the series of the first of `names` the text has (None: none of them)."""
    for name in names:
        values = samples.get(name)
        if values:
            return sum(values)
    return None


def _mean(samples: Samples, *names: str) -> float | None:
    for name in names:
        values = samples.get(name)
        if values:
            return sum(values) / len(values)
    return None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return min(1.0, max(0.0, numerator / denominator))


def _sglang(samples: Samples) -> ServerMetrics:
    # token_usage first: num_used_tokens leaves out the Mamba pool of hybrid models, and
    # counts sliding-window tokens against the full pool's max_total_num_tokens.
    kv = _mean(samples, "sglang:token_usage")
    if kv is None:
        kv = _ratio(
            _sum(samples, "sglang:num_used_tokens"), _sum(samples, "sglang:max_total_num_tokens")
        )
    return ServerMetrics(
        server="sglang",
        running=_sum(samples, "sglang:num_running_reqs"),
        queued=_sum(samples, "sglang:num_queue_reqs"),
        kv_usage=kv,
        gen_tok_s=_sum(samples, "sglang:gen_throughput"),
        retracted=_sum(samples, "sglang:num_retracted_requests_total"),
        cache_hit=_mean(samples, "sglang:cache_hit_rate"),
        generation_tokens=_sum(samples, "sglang:generation_tokens_total"),
    )


def _vllm(samples: Samples) -> ServerMetrics:
    return ServerMetrics(
        server="vllm",
        running=_sum(samples, "vllm:num_requests_running"),
        queued=_sum(samples, "vllm:num_requests_waiting"),
        kv_usage=_mean(samples, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        retracted=_sum(samples, "vllm:num_preemptions_total"),
        cache_hit=_ratio(
            _sum(samples, "vllm:prefix_cache_hits_total"),
            _sum(samples, "vllm:prefix_cache_queries_total"),
        ),
        generation_tokens=_sum(samples, "vllm:generation_tokens_total"),
    )


def parse_metrics(text: str) -> ServerMetrics:
    """The load in one /metrics answer (no rates: see MetricsReader); MetricsError if the text
    is not Prometheus text. Text in neither server's names gives all None."""
    samples = read_samples(text)
    if any(name.startswith("sglang:") for name in samples):
        return _sglang(samples).bounded()
    if any(name.startswith("vllm:") for name in samples):
        return _vllm(samples).bounded()
    return ServerMetrics()


class MetricsReader:
    """One server's successive /metrics reads, for the rates a single read cannot give.

    Without a throughput gauge (vLLM, an older SGLang), `gen_tok_s` is the generation token
    counter's rise over the time between two reads; a counter that fell (the server
    restarted) gives no rate for that interval.
    """

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None  # (time, generation tokens)

    def read(self, text: str, now: float) -> ServerMetrics:
        """Parse `text` read at `now` (monotonic seconds); MetricsError if it is not metrics."""
        metrics = parse_metrics(text)
        counter = metrics.generation_tokens
        rate: float | None = None
        if counter is not None:
            if self._last is not None:
                then, before = self._last
                if now > then and counter >= before:
                    rate = (counter - before) / (now - then)
            self._last = (now, counter)
        if metrics.gen_tok_s is None and rate is not None:
            return replace(metrics, gen_tok_s=RATE.check(rate))
        return metrics
