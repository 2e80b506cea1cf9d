"""A server error bigger than what the clients read of one (64 KiB) is quoted saying so.

The attack (issue 16, left open by the last pass): a JSON error body over 64 KiB was cut at
the read bound, no longer parsed, and its first 200 characters were stored as if they were
the whole message. Now the quote says what it left out: the bytes cut when the body's size
was declared (the simulator's `huge_error` fault, a 1 MiB message with a Content-Length),
that the body went on past 64 KiB when it was not (a chunked body from a hostile server).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from gen_tui.backends.clients import OpenAIClient, Request, SGLangClient
from gen_tui.backends.clients.base import InferenceClient
from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.engine import Engine
from gen_tui.backends.engine.checks import receive
from gen_tui.backends.sim import Faults
from gen_tui.backends.sim.faults import HUGE_ERROR_CHARS
from gen_tui.backends.untrusted import QUOTED_BODY_BYTES
from tests.support.engine import make_config

BOTH = pytest.mark.parametrize(
    ("api", "stream"),
    [("openai", False), ("openai", True), ("sglang", False), ("sglang", True)],
)
CUT = re.compile(r"… \(\+([\d,]+) bytes cut\)$")


def _client(api: str, stream: bool) -> InferenceClient:
    sampling = {"max_new_tokens": 16}
    if api == "openai":
        return OpenAIClient(
            sampling, model="sim-model", api_key=None, key_hint="KEY", stream=stream
        )
    return SGLangClient(sampling, stream=stream)


async def _failure(api: str, stream: bool, url: str) -> RequestFailed:
    request = Request("A/1/x", "A", [{"role": "user", "content": "hi"}], [5, 6, 7])
    async with _client(api, stream) as client:
        with pytest.raises(RequestFailed) as caught:
            await receive(client.generate(url, request), url)
    return caught.value


@BOTH
async def test_a_huge_error_from_the_simulator_is_quoted_with_its_cut_said(
    api: str, stream: bool, sim: Callable[..., Any]
) -> None:
    server = await sim(faults=Faults(huge_error=1.0))
    failure = await _failure(api, stream, server.url)
    assert failure.retry and failure.status == 500
    assert failure.reason.startswith('HTTP 500: {"error":')
    assert f"Simulated huge error ({HUGE_ERROR_CHARS:,} characters): EEE" in failure.reason
    cut = CUT.search(failure.reason)
    assert cut is not None, failure.reason
    body_bytes = int(cut.group(1).replace(",", "")) + QUOTED_BODY_BYTES
    assert HUGE_ERROR_CHARS < body_bytes < HUGE_ERROR_CHARS + 100  # the whole body's size
    assert server.stats.faults["huge_error"] == 1


async def test_a_run_stores_the_quote_in_errors_jsonl(
    sim: Callable[..., Any],
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
) -> None:
    server = await sim(faults=Faults(huge_error=1.0))
    config = make_config(
        tokenizer_dir, prompts_dir(A=3), tmp_path / "out", [server.url], max_retries=0
    )
    await Engine(config).run()
    lines = (tmp_path / "out" / "A" / "errors.jsonl").read_bytes().splitlines()
    assert len(lines) == 3
    for line in lines:
        reason = orjson.loads(line)["reason"]
        assert reason.startswith('HTTP 500: {"error":') and CUT.search(reason), reason
        assert len(line) < 1000


@pytest.fixture
async def chunked_error() -> AsyncIterator[str]:
    """A server whose every answer is a 500 with a 1 MiB JSON error sent chunked: no size
    is declared, so a client cannot know how much it did not read."""

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=500)
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(b'{"error": {"message": "')
        for _ in range(16):
            await response.write(b"E" * (64 << 10))
        await response.write(b'"}}')
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    app.router.add_post("/generate", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@BOTH
async def test_a_chunked_error_past_the_bound_says_it_went_on(
    api: str, stream: bool, chunked_error: str
) -> None:
    failure = await _failure(api, stream, chunked_error)
    assert failure.reason.startswith('HTTP 500: {"error": {"message": "EEEE')
    assert failure.reason.endswith(f"… (body over 64 KiB, first {QUOTED_BODY_BYTES} bytes)")
