"""How tests and people drive the simulator: SGLang's info endpoints (/health,
/get_model_info, /get_server_info, /get_load), the /_sim/stats and /_sim/config hooks the
tests use to read and change it while it runs, and its command line (`gen-tui sim`), which
serves until SIGTERM and refuses bad flags in one line."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import Faults, LengthProfile, SimConfig, SimServer, create_app
from tests.support.sim_cli import assert_refused_in_one_line, sim_process
from tests.support.sim_http import FAST, generate


async def test_info_endpoints(http: aiohttp.ClientSession) -> None:
    async with SimServer(SimConfig(tokens_per_s=FAST, slots=5, context_length=4096)) as sim:
        async with http.get(sim.url + "/health") as resp:
            assert resp.status == 200 and await resp.read() == b""
        async with http.get(sim.url + "/get_model_info") as resp:
            info = orjson.loads(await resp.read())
        assert info["model_path"] == "gen-tui/simulated-model"
        assert info["model_type"] == "simulated" and info["is_generation"] is True
        assert "tokenizer_path" in info
        async with http.get(sim.url + "/get_server_info") as resp:
            server = orjson.loads(await resp.read())
        assert server["version"] == "0.5.x-sim" and server["status"] == "ready"
        assert server["max_running_requests"] == 5
        assert server["max_total_num_tokens"] == 5 * 4096
        assert server["sim"]["slots"] == 5
        async with http.get(sim.url + "/get_load") as resp:
            load = orjson.loads(await resp.read())
        assert load[0]["dp_rank"] == 0 and load[0]["num_reqs"] == 0

        await generate(http, sim, {"input_ids": [1], "rid": "Z/1/a"})
        async with http.get(sim.url + "/_sim/stats") as resp:
            stats = orjson.loads(await resp.read())
        assert stats["requests"] == stats["completed"] == 1
        assert stats["completed_rids"] == ["Z/1/a"]
        assert stats["total_completion_tokens"] == sim.stats.total_completion_tokens > 0


async def test_sim_config_patch(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST)
    faults = config.faults
    async with SimServer(config) as sim:
        patch = {
            "tokens_per_s": 123.0,
            "slots": 3,
            "faults": {"rate_429": 0.25},
            "profiles": {"X": {"mean": 10, "cv": 0.1}},
        }
        async with http.post(sim.url + "/_sim/config", json=patch) as resp:
            assert resp.status == 200
            shown = orjson.loads(await resp.read())
        assert shown["tokens_per_s"] == 123.0 and shown["faults"]["rate_429"] == 0.25
        assert sim.config is config and config.faults is faults
        assert (config.tokens_per_s, config.slots, faults.rate_429) == (123.0, 3, 0.25)
        assert config.profiles["X"] == LengthProfile(mean=10, cv=0.1)

        for bad in ({"slots": 0}, {"bogus": 1}, {"faults": {"rate_429": 2}}, {"tokens_per_s": "x"}):
            async with http.post(sim.url + "/_sim/config", json=bad) as resp:
                assert resp.status == 400
                assert orjson.loads(await resp.read())["error"]["message"]
        assert (config.slots, faults.rate_429, config.tokens_per_s) == (3, 0.25, 123.0)


def test_invalid_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        create_app(SimConfig(slots=0))
    with pytest.raises(ValueError, match="tokens_per_s"):
        create_app(SimConfig(tokens_per_s=0))
    with pytest.raises(ValueError, match="mean"):
        LengthProfile(mean=0)
    with pytest.raises(ValueError, match="rate_429"):
        Faults(rate_429=1.5)


async def test_cli_serves_until_sigterm(http: aiohttp.ClientSession) -> None:
    argv = ("--slots", "2", "--tokens-per-s", "1e7", "--profile", "B2=100:0.5", "--fail-429", "0")
    async with sim_process(*argv) as url:
        async with http.get(url + "/health") as resp:
            assert resp.status == 200
        async with http.get(url + "/get_server_info") as resp:
            info = orjson.loads(await resp.read())
        assert info["max_running_requests"] == 2
        assert info["sim"]["profiles"] == {"B2": {"mean": 100.0, "cv": 0.5}}
        async with http.post(url + "/generate", json={"input_ids": [1], "rid": "B2/1"}) as resp:
            assert resp.status == 200


@pytest.mark.parametrize(
    "argv",
    [
        ["--fail-5xx", "1.5"],
        ["--profile", "B2"],
        ["--profile", "B2=-3"],
        ["--slots", "0"],
        ["--tokens-per-s", "fast"],
        ["--port", "70000"],
        ["--bogus"],
    ],
)
def test_cli_bad_flags_give_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_refused_in_one_line(argv, capsys)
