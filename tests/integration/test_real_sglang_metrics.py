"""The /metrics reader, the SGLang client's metrics path, the remote watcher's forwarding and
the simulator's names, against what SGLang's own metrics code writes.

A real SGLang server needs a GPU; the code that writes its /metrics does not. Under
GEN_TUI_SGLANG_PYTHON (`.ci/run` builds it in `.venv-sglang`: sglang 0.5.23 on torch 2.13.0
CPU) tests/support/sglang_metrics_probe.py runs SGLang's collectors the way its server
does (one process per scheduler rank, labelled by SGLang's own code, aggregated by
prometheus_client's multiprocess collector) for a known load, and serves the result over
HTTP. The load here is two data-parallel attention ranks with priority scheduling on, the
layout in which summing every series over-counts (each queue gauge repeats its total per
priority). Without that python these tests are skipped, saying why.

The last test is against a running SGLang server started with `--enable-metrics`: the one
GEN_TUI_SGLANG_URL names (a GPU box), else the session's real SGLang server on this CPU
(tests/support/real_sglang.py; skipped, saying why, where it cannot run).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gen_tui.backends.clients.sglang import SGLangClient
from gen_tui.backends.telemetry.metrics import MetricsReader, ServerMetrics, parse_metrics
from gen_tui.backends.watcher.telemetry import fetch_metrics
from tests.support.real_sglang import RealSGLang

SGLANG_URL = os.environ.get("GEN_TUI_SGLANG_URL", "").rstrip("/")
SGLANG_PYTHON = os.environ.get("GEN_TUI_SGLANG_PYTHON", "")
SGLANG_VERSION = "0.5.23"
PROBE = Path(__file__).parents[1] / "support" / "sglang_metrics_probe.py"

# A tiny Llama's config: SGLang's ServerArgs reads the model's config, never its weights.
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 4096,
}  # fmt: skip
RANK = {"max_total_num_tokens": 1000, "token_usage": 0.42}
# tp 2 with DP attention over 2: each rank is its own attention group, so both report.
# num_used_tokens disagrees with token_usage on purpose (as for a hybrid model, whose Mamba
# pool token_usage counts and num_used_tokens does not): KV use must be token_usage.
LOAD = {
    "model_name": "probe-model", "tp_size": 2, "dp_size": 2, "dp_attention": True,
    "priority": True,
    "ranks": {
        "0": {**RANK, "running": {"0": 3, "1": 1}, "queued": {"0": 2}, "num_used_tokens": 100,
              "gen_throughput": 1000.5, "cache_hit_rate": 0.5, "retracted": 2},
        "1": {**RANK, "running": {"0": 3}, "queued": {"1": 1}, "num_used_tokens": 420,
              "gen_throughput": 234.0, "cache_hit_rate": 0.25, "retracted": 1},
    },
    "finished": [[10, 100, True], [20, 50, False]],
}  # fmt: skip
EXPECTED = ServerMetrics(
    server="sglang", running=7, queued=3, kv_usage=0.42, gen_tok_s=1234.5, retracted=3,
    cache_hit=0.375, generation_tokens=150,
)  # fmt: skip
READ = (
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
    "sglang:num_used_tokens", "sglang:max_total_num_tokens", "sglang:gen_throughput",
    "sglang:cache_hit_rate", "sglang:num_retracted_requests", "sglang:generation_tokens",
)  # fmt: skip
"""The families the reader reads (counters by their family name, without `_total`)."""


def sglang_problem() -> str | None:
    """Why GEN_TUI_SGLANG_PYTHON cannot run SGLang's metrics code (None: it can)."""
    if not SGLANG_PYTHON:
        return (
            f"GEN_TUI_SGLANG_PYTHON is not set: it names a python with sglang {SGLANG_VERSION} "
            "and torch (CPU), which .ci/run builds in .venv-sglang"
        )
    check = "from importlib.metadata import version; print(version('sglang'))"
    try:
        done = subprocess.run(
            [SGLANG_PYTHON, "-c", check], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"GEN_TUI_SGLANG_PYTHON={SGLANG_PYTHON} cannot run: {exc}"
    if done.stdout.strip() != SGLANG_VERSION:
        found = done.stdout.strip() or (done.stderr.strip().splitlines() or ["nothing"])[-1]
        return f"GEN_TUI_SGLANG_PYTHON={SGLANG_PYTHON} has no sglang {SGLANG_VERSION}: {found}"
    return None


@pytest.fixture(scope="module")
def sglang_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of SGLang's own /metrics for LOAD, served by the probe until the module ends."""
    if problem := sglang_problem():
        pytest.skip(problem)
    model = tmp_path_factory.mktemp("model")
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    log = model / "probe.log"
    with log.open("w") as errors:
        probe = subprocess.Popen(
            [SGLANG_PYTHON, str(PROBE), str(model), json.dumps(LOAD)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        )  # fmt: skip
    assert probe.stdout is not None and probe.stdin is not None
    try:
        line = probe.stdout.readline()  # blocks until it serves or dies (pytest's timeout)
        assert line.startswith("port "), f"the probe failed:\n{log.read_text()[-3000:]}"
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        probe.stdin.close()
        try:
            probe.wait(timeout=10)
        except subprocess.TimeoutExpired:
            probe.kill()
            probe.wait()


def _shape(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Each family READ names: its type and the label names of its series."""
    shape = {}
    for family in text_string_to_metric_families(text):
        if family.name in READ:
            labels = frozenset(name for sample in family.samples for name in sample.labels)
            shape[family.name] = (family.type, labels)
    return shape


@pytest.mark.timeout(300)  # the probe imports sglang and torch, some 20 s on 2 shared cores
async def test_sglangs_own_metrics_read_through_the_client(sglang_url: str) -> None:
    async with SGLangClient({}) as client:
        text = await client.metrics(sglang_url)
    assert text is not None
    assert 'priority="1"' in text and 'dp_rank="1"' in text  # the layout this test is about
    metrics = MetricsReader().read(text, asyncio.get_running_loop().time())
    assert metrics.server == "sglang"
    for field in ("running", "queued", "kv_usage", "gen_tok_s", "retracted", "cache_hit",
                  "generation_tokens"):  # fmt: skip
        assert getattr(metrics, field) == pytest.approx(getattr(EXPECTED, field)), field


@pytest.mark.timeout(300)
async def test_the_watcher_forwards_what_reads_the_same(sglang_url: str) -> None:
    message = await asyncio.to_thread(fetch_metrics, sglang_url)
    assert "text" in message, message
    forwarded = parse_metrics(message["text"])
    assert forwarded.to_json() == pytest.approx(EXPECTED.to_json())


@pytest.mark.timeout(300)
async def test_the_simulator_speaks_sglangs_names_and_labels(
    sglang_url: str, sim: Callable[..., Any]
) -> None:
    server = await sim(metrics="sglang")
    async with SGLangClient({}) as client:
        real, simulated = await client.metrics(sglang_url), await client.metrics(server.url)
    assert real is not None and simulated is not None
    real_shape, sim_shape = _shape(real), _shape(simulated)
    assert set(real_shape) == set(READ)
    # dp_rank and priority label series only under data parallelism and priority scheduling.
    layout = frozenset({"dp_rank", "priority"})
    for name in READ:
        kind, labels = real_shape[name]
        assert sim_shape[name] == (kind, labels - layout), name


@pytest.fixture
def server_url(request: pytest.FixtureRequest) -> str:
    """GEN_TUI_SGLANG_URL where it names a server (a GPU box), else the session's real SGLang
    server on this CPU (tests/conftest.py's `real_sglang`, skipped where it cannot run)."""
    if SGLANG_URL:
        return SGLANG_URL
    server: RealSGLang = request.getfixturevalue("real_sglang")
    return server.url


@pytest.mark.timeout(600)  # the session's server may start here: about a minute, cold
async def test_a_real_sglang_servers_metrics_parse(server_url: str) -> None:
    reader = MetricsReader()
    async with SGLangClient({}) as client:
        text = await client.metrics(server_url)
        assert text is not None, f"{server_url} serves no /metrics: start it --enable-metrics"
        first = reader.read(text, asyncio.get_running_loop().time())
    assert first.server == "sglang"
    assert first.running is not None and first.queued is not None
    assert first.kv_usage is not None and 0 <= first.kv_usage <= 1
    assert first.gen_tok_s is not None
