"""The /metrics parser: SGLang's and vLLM's names read into one ServerMetrics, summed over
ranks, rates from counters where no gauge says, and bad text refused with one clear line."""

from __future__ import annotations

import pytest

from gen_tui.backends.telemetry.metrics import (
    METRICS_BYTES,
    MetricsError,
    MetricsReader,
    ServerMetrics,
    parse_metrics,
)

# As SGLang 0.5.x words it with --dp 2: every series labelled, one per rank, with a
# histogram and a counter's `_created` twin in between.
SGLANG_TWO_RANKS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 30.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="m",tp_rank="0"} 34.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",model_name="m"} 5.0
sglang:num_queue_reqs{dp_rank="1",model_name="m"} 7.0
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",model_name="m"} 0.5
sglang:token_usage{dp_rank="1",model_name="m"} 0.9
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{dp_rank="0",model_name="m"} 50000.0
sglang:num_used_tokens{dp_rank="1",model_name="m"} 30000.0
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{dp_rank="0",model_name="m"} 100000.0
sglang:max_total_num_tokens{dp_rank="1",model_name="m"} 100000.0
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0",model_name="m"} 1500.5
sglang:gen_throughput{dp_rank="1",model_name="m"} 1499.5
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",model_name="m"} 0.2
sglang:cache_hit_rate{dp_rank="1",model_name="m"} 0.4
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
sglang:time_to_first_token_seconds_count{model_name="m"} 4.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 0.3
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{dp_rank="0",model_name="m"} 3.0
sglang:num_retracted_requests_total{dp_rank="1",model_name="m"} 4.0
sglang:num_retracted_requests_created{dp_rank="0",model_name="m"} 1.7e+09
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{dp_rank="0",model_name="m"} 1.0e+06
sglang:generation_tokens_total{dp_rank="1",model_name="m"} 2.0e+06
"""

VLLM = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 12.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 9.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} {tokens}
"""


def test_sglang_names_are_summed_over_ranks() -> None:
    metrics = parse_metrics(SGLANG_TWO_RANKS)
    assert metrics.server == "sglang"
    assert (metrics.running, metrics.queued) == (64, 12)
    assert metrics.kv_usage == pytest.approx(0.7)  # token_usage: each rank's fullest pool
    assert metrics.gen_tok_s == pytest.approx(3000)
    assert metrics.retracted == 7  # the counter, not its `_created` twin
    assert metrics.cache_hit == pytest.approx(0.3)
    assert metrics.generation_tokens == 3e6


def test_sglang_kv_use_without_token_usage_is_used_over_capacity() -> None:
    text = "\n".join(line for line in SGLANG_TWO_RANKS.splitlines() if "token_usage" not in line)
    assert parse_metrics(text + "\n").kv_usage == pytest.approx(80000 / 200000)


def test_sglang_per_priority_breakdowns_are_not_counted_twice() -> None:
    # --enable-priority-scheduling: the total under priority="", then each priority's part.
    text = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{priority="",tp_rank="0"} 4.0
sglang:num_running_reqs{priority="0",tp_rank="0"} 3.0
sglang:num_running_reqs{priority="1",tp_rank="0"} 1.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="true",priority="0"} 10.0
sglang:generation_tokens_total{is_streaming="true",priority="1"} 5.0
"""
    metrics = parse_metrics(text)
    assert metrics.running == 4
    assert metrics.generation_tokens == 15  # a counter's priorities are parts, not repeats


def test_vllm_names_and_the_rate_from_the_token_counter() -> None:
    reader = MetricsReader()
    first = reader.read(VLLM.replace("{tokens}", "1000.0"), now=100.0)
    assert first.server == "vllm"
    assert (first.running, first.queued, first.kv_usage) == (12, 3, 0.75)
    assert (first.retracted, first.cache_hit) == (9, 0.25)
    assert first.gen_tok_s is None  # one read has no rate
    second = reader.read(VLLM.replace("{tokens}", "5000.0"), now=102.0)
    assert second.gen_tok_s == pytest.approx(2000)
    restarted = reader.read(VLLM.replace("{tokens}", "10.0"), now=104.0)
    assert restarted.gen_tok_s is None  # a counter that fell: the server restarted


def test_a_throughput_gauge_wins_over_the_counter_rate() -> None:
    reader = MetricsReader()
    reader.read(SGLANG_TWO_RANKS, now=0.0)
    again = SGLANG_TWO_RANKS.replace("1.0e+06", "1.5e+06")
    assert reader.read(again, now=1.0).gen_tok_s == pytest.approx(3000)


def test_a_server_saying_nothing_we_know_reads_as_none() -> None:
    metrics = parse_metrics("# TYPE http_requests_total counter\nhttp_requests_total 5\n")
    assert metrics == ServerMetrics()
    assert parse_metrics("") == ServerMetrics()
    assert parse_metrics("sglang:num_running_reqs NaN\n").running is None


@pytest.mark.parametrize(
    "text",
    ["<html>404 not found</html>", "sglang:num_running_reqs{tp_rank=0} 3\n", "\x1b[31m red"],
)
def test_text_that_is_not_prometheus_is_one_clear_error(text: str) -> None:
    with pytest.raises(MetricsError, match="not Prometheus text") as caught:
        parse_metrics(text)
    assert "\n" not in str(caught.value)
    assert "\x1b" not in str(caught.value)  # server text is data, never a terminal escape


def test_too_much_text_is_refused_unread() -> None:
    with pytest.raises(MetricsError, match="MB of metrics"):
        parse_metrics("#" * (METRICS_BYTES + 1))


def test_json_round_trip_is_tolerant() -> None:
    metrics = parse_metrics(SGLANG_TWO_RANKS)
    back = ServerMetrics.from_json(metrics.to_json())
    assert back is not None
    assert (back.running, back.queued, back.kv_usage) == (64, 12, metrics.kv_usage)
    odd = ServerMetrics.from_json(
        {"running": "many", "kv_usage": 7, "queued": True, "gen_tok_s": 5}
    )
    assert odd == ServerMetrics(gen_tok_s=5)
    assert ServerMetrics.from_json([1, 2]) is None
