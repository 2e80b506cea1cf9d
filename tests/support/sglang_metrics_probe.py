"""Serve the /metrics that SGLang's own metrics code writes for a given load, over HTTP.

Runs under GEN_TUI_SGLANG_PYTHON (`.ci/run` builds it in `.venv-sglang`: sglang 0.5.23 on
torch 2.13.0 CPU), not gen-tui's Python; it imports sglang, never gen_tui, and judges
nothing: tests/integration/test_real_sglang_metrics.py reads what it serves with gen-tui.

    python sglang_metrics_probe.py MODEL_DIR SPEC_JSON

A real SGLang server needs a GPU; the code that writes its /metrics does not. This does
what the server does, with SGLang's own functions: PROMETHEUS_MULTIPROC_DIR set before
prometheus_client is imported; one process per scheduler rank that publishes its
ServerArgs (`publish(role="scheduler")` with the rank the launcher gives it, as
`run_scheduler_process` does), builds `SchedulerMetricsCollector.init_new` (which picks
the labels: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank, [priority], [dp_rank])
and, on the ranks SGLang logs from, calls `emit_constants`, `increment_retracted_reqs` and
`log_stats(SchedulerStats(...))`; one tokenizer process with `TokenizerMetricsCollector`
observing the finished requests; then a `MultiProcessCollector` registry served by
prometheus_client's HTTP server, as SGLang's `add_prometheus_middleware` serves it.

SPEC_JSON: `{"model_name", "tp_size", "dp_size", "dp_attention", "priority",
"ranks": {"TP_RANK": {"running": N | {"PRIORITY": N}, "queued": ..., "token_usage",
"num_used_tokens", "max_total_num_tokens", "gen_throughput", "cache_hit_rate",
"retracted"}}, "finished": [[prompt_tokens, generation_tokens, streaming], ...]}`.
Prints `port N` once it serves; stops when its standard input closes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
from typing import Any


def _torchvision_without_ops() -> None:
    """SGLang's configs package imports InternVL's image transforms (torchvision) at import
    time. PyPI's torchvision is linked against CUDA torch, so on the CPU torch its C ops do
    not load, and its import then fails declaring fake kernels for the two ops it declares
    unconditionally. Declaring those two schemas lets the real torchvision import; nothing
    on the metrics path calls it."""
    import torch

    library = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_without_ops.library = library  # type: ignore[attr-defined]  # keep it alive


def _server_args(model_dir: str, spec: dict[str, Any]) -> Any:
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(
        model_path=model_dir,
        served_model_name=spec["model_name"],
        enable_metrics=True,
        tp_size=spec.get("tp_size", 1),
        dp_size=spec.get("dp_size", 1),
        enable_dp_attention=spec.get("dp_attention", False),
        enable_priority_scheduling=spec.get("priority", False),
        device="cpu",
    )


def _count(value: int | dict[str, int]) -> Any:
    """A QueueCount: a plain total, or a per-priority breakdown (total = its sum)."""
    from sglang.srt.observability.metrics_collector import QueueCount

    if isinstance(value, dict):
        by_priority = {int(k): v for k, v in value.items()}
        return QueueCount(total=sum(by_priority.values()), by_priority=by_priority)
    return QueueCount(total=value)


def _scheduler(model_dir: str, spec: dict[str, Any], tp_rank: int) -> None:
    """One scheduler rank, labelled and gated as SGLang's scheduler does it."""
    from sglang.srt.layers.dp_attention import compute_dp_attention_world_info
    from sglang.srt.observability.metrics_collector import (
        SchedulerMetricsCollector,
        SchedulerStats,
    )
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish, spawn_world_rank

    server_args = _server_args(model_dir, spec)
    dp_rank = None
    if spec.get("dp_attention"):
        _, _, dp_rank, _ = compute_dp_attention_world_info(
            tp_rank, server_args.tp_size, server_args.dp_size, 1
        )
    world_rank = spawn_world_rank(server_args, tp_rank=tp_rank, pp_rank=0)
    publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=world_rank, dp_rank=dp_rank))
    context = SchedulerMetricsCollector.init_new(
        server_args=server_args,
        enable_priority_scheduling=server_args.enable_priority_scheduling,
        enable_lora=False,
        enable_hierarchical_cache=False,
    )
    load = spec["ranks"].get(str(tp_rank))
    collector = context.collector
    if load is None or collector is None or not context.current_scheduler_metrics_enabled:
        return  # SGLang logs from attention-TP rank 0 of each group only
    collector.emit_constants(
        max_total_num_tokens=load["max_total_num_tokens"],
        max_total_num_tokens_swa=None,
        weight_memory_usage_gb=0.1,
        kv_cache_memory_usage_gb=0.2,
        graph_memory_usage_gb={},
        max_running_requests_under_SLO=None,
        page_size=1,
        num_pages=load["max_total_num_tokens"],
        context_len=4096,
        startup_available_gpu_memory_gb=0.0,
    )
    if load.get("retracted"):
        collector.increment_retracted_reqs(load["retracted"], 100 * load["retracted"], 0)
    collector.log_stats(
        SchedulerStats(
            num_running_reqs=_count(load["running"]),
            num_queue_reqs=_count(load["queued"]),
            gen_throughput=load["gen_throughput"],
            cache_hit_rate=load["cache_hit_rate"],
            token_usage=load["token_usage"],
            full_token_usage=load["token_usage"],
            num_used_tokens=load["num_used_tokens"],
            kv_used_tokens=load["num_used_tokens"],
            kv_available_tokens=load["max_total_num_tokens"] - load["num_used_tokens"],
            num_retracted_reqs=load.get("retracted", 0),
        )
    )
    attention_rank = get_parallel().attn_tp_rank
    print(
        f"tp_rank {tp_rank} dp_rank {dp_rank} attn_tp_rank {attention_rank} logged", file=sys.stderr
    )


def _tokenizer(model_dir: str, spec: dict[str, Any]) -> None:
    """The tokenizer manager's collector: one observation per finished request."""
    from sglang.srt.observability.metrics_collector import (
        TokenizerMetricsCollector,
        tokenizer_metric_labels,
    )
    from sglang.srt.runtime_context import publish

    server_args = _server_args(model_dir, spec)
    publish(server_args, role="tokenizer")
    collector = TokenizerMetricsCollector(server_args=server_args, labels=tokenizer_metric_labels())
    for prompt_tokens, generation_tokens, streaming in spec.get("finished", []):
        collector.observe_one_finished_request(
            dict(collector.labels),
            prompt_tokens,
            generation_tokens,
            cached_tokens=0,
            e2e_latency=1.0,
            has_grammar=False,
            is_streaming=streaming,
        )


def _run(target: Any, *args: Any) -> None:
    """Run `target` in its own process, as SGLang runs each scheduler and its tokenizer."""
    process = multiprocessing.get_context("fork").Process(target=target, args=args)
    process.start()
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"{target.__name__}{args[2:]} failed with exit code {process.exitcode}")


def main() -> None:
    model_dir, spec = sys.argv[1], json.loads(sys.argv[2])
    folder = tempfile.TemporaryDirectory()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder.name  # before prometheus_client loads
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _torchvision_without_ops()
    import sglang.srt.observability.metrics_collector  # noqa: F401  # load once, then fork

    for tp_rank in range(spec.get("tp_size", 1)):
        _run(_scheduler, model_dir, spec, tp_rank)
    _run(_tokenizer, model_dir, spec)

    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    print(f"port {server.server_port}", flush=True)
    sys.stdin.read()
    server.shutdown()
    folder.cleanup()


if __name__ == "__main__":
    main()
