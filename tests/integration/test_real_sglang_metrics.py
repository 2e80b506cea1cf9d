"""The /metrics parser and client against a real SGLang server started with
`--enable-metrics`: the simulator speaks the names its author read in SGLang's source; this
is the check that a real one agrees.

SGLang needs torch and a model, which gen-tui does not: point GEN_TUI_SGLANG_URL at a
running server (a CPU build in its own environment, as GEN_TUI_SERVE_PYTHON is for
transformers serve). Without it the test is skipped, saying why.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from gen_tui.backends.clients.sglang import SGLangClient
from gen_tui.backends.telemetry.metrics import MetricsReader

SGLANG_URL = os.environ.get("GEN_TUI_SGLANG_URL", "").rstrip("/")

pytestmark = pytest.mark.skipif(
    not SGLANG_URL,
    reason="no real SGLang server: set GEN_TUI_SGLANG_URL to one started with "
    "--enable-metrics (SGLang needs torch and a model; none is installed here)",
)


async def test_a_real_sglang_servers_metrics_parse() -> None:
    reader = MetricsReader()
    async with SGLangClient({}) as client:
        text = await client.metrics(SGLANG_URL)
        assert text is not None, f"{SGLANG_URL} serves no /metrics: start it --enable-metrics"
        first = reader.read(text, asyncio.get_running_loop().time())
    assert first.server == "sglang"
    assert first.running is not None and first.queued is not None
    assert first.kv_usage is not None and 0 <= first.kv_usage <= 1
    assert first.gen_tok_s is not None
