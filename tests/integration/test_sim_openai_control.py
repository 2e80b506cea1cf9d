"""The simulator's OpenAI-side settings, changed at run time through /_sim/config and set on
its command line (key from an environment variable, cost, stream ending, strict model), with
bad values refused (400, or one line and exit 2) and the key never shown."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import SimConfig, SimServer
from tests.support.sim_cli import assert_refused_in_one_line, sim_process
from tests.support.sim_http import CHAT, FAST, PROMPT_TOKENS, events_of, reconfigure, request


async def test_sim_config_patch_of_the_api_fields(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST)
    async with SimServer(config) as sim:
        patch = {
            "openai_stream_end": "none",
            "cost_per_million": [1, 2.5],
            "model_name": "m",
            "strict_model": True,
            "openai_keepalive": True,
            "api_key": "sk-patched",
            "faults": {"payment_402": 0.5},
        }
        async with http.post(sim.url + "/_sim/config", json=patch) as resp:
            assert resp.status == 200
            shown = orjson.loads(await resp.read())
        assert shown["cost_per_million"] == [1.0, 2.5] and shown["api_key"] == "***"
        assert config.cost_per_million == (1.0, 2.5) and config.api_key == "sk-patched"
        assert (config.openai_stream_end, config.model_name, config.strict_model) == (
            "none",
            "m",
            True,
        )
        assert config.openai_keepalive and config.faults.payment_402 == 0.5

        for bad in (
            {"openai_stream_end": "eventually"},
            {"cost_per_million": [1]},
            {"cost_per_million": [1, -2]},
            {"strict_model": "yes"},
            {"api_key": ""},
            {"model_name": ""},
            {"faults": {"payment_402": 2}},
        ):
            async with http.post(sim.url + "/_sim/config", json=bad) as resp:
                assert resp.status == 400, bad
        assert config.openai_stream_end == "none" and config.cost_per_million == (1.0, 2.5)
        await reconfigure(sim, {"cost_per_million": None, "api_key": None})
        assert config.cost_per_million is None and config.api_key is None


async def test_cli_serves_the_api(http: aiohttp.ClientSession) -> None:
    secret = "sk-cli-secret-42"
    argv = (
        *("--tokens-per-s", "1e7", "--profile", "T=10:0"),
        *("--api-key-env", "SIM_TEST_KEY", "--cost", "1,4", "--openai-stream-end", "none"),
        *("--model-name", "tiny", "--strict-model", "--fail-402", "0"),
    )
    async with sim_process(*argv, env={"SIM_TEST_KEY": secret}) as url:
        body = request(model="tiny", stream=True, stream_options={"include_usage": True})
        async with http.post(url + CHAT, json=body) as resp:
            assert resp.status == 401
        headers = {"Authorization": f"Bearer {secret}", "X-Sim-Dataset": "T"}
        async with http.post(url + CHAT, json=body, headers=headers) as resp:
            assert resp.status == 200
            raw = await resp.read()
        assert b"[DONE]" not in raw
        last = events_of(raw)[-1]
        assert last["choices"][0]["finish_reason"] == "stop"
        assert last["usage"]["cost"] == pytest.approx((PROMPT_TOKENS * 1 + 10 * 4) / 1e6)
        async with http.post(url + CHAT, json={**body, "model": "big"}, headers=headers) as resp:
            assert resp.status == 400
        async with http.get(url + "/_sim/config") as resp:
            assert secret.encode() not in await resp.read()


@pytest.mark.parametrize(
    "argv",
    [
        ["--cost", "1"],
        ["--cost", "a,b"],
        ["--cost", "1,-2"],
        ["--openai-stream-end", "eventually"],
        ["--fail-402", "2"],
        ["--api-key-env", "GEN_TUI_SIM_TEST_UNSET_VARIABLE"],
    ],
)
def test_cli_bad_api_flags_give_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEN_TUI_SIM_TEST_UNSET_VARIABLE", raising=False)
    assert_refused_in_one_line(argv, capsys)
