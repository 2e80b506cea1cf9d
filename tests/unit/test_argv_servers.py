"""Which servers a run's command line names, for the panel's /metrics strip: `--lane` runs
included (a fleet run named none by `--server-url`, so the panel polled gen-tui's default
127.0.0.1:30000 and showed it "unreachable" beside the run's real servers)."""

from __future__ import annotations

from gen_tui.backends.hosts.argv import server_urls
from gen_tui.backends.settings import DEFAULT_SERVER

RUN = ["/usr/bin/python3", "-m", "gen_tui.app.cli", "run", "--prompts-dir", "p"]


def test_native_lanes_are_read_and_provider_apis_are_not() -> None:
    argv = [
        *RUN,
        "--lane", "box=http://gpu-box:30000",
        "--lane=box2=http://gpu-box:30001/,api=sglang,concurrency=8",
        "--lane", "api=https://openrouter.ai/api,api=openai,price=0.2/0.94",
        "--lane", "batch=https://api.openai.com,api=openai-batch,turnaround=2h",
    ]  # fmt: skip
    assert server_urls(argv) == ["http://gpu-box:30000", "http://gpu-box:30001"]


def test_a_fleet_of_apis_only_names_no_server_and_not_the_default() -> None:
    argv = [*RUN, "--lane", "api=https://openrouter.ai/api,api=openai"]
    assert server_urls(argv) == []


def test_a_bad_lane_is_skipped_and_plain_runs_keep_their_rules() -> None:
    assert server_urls([*RUN, "--lane", "nonsense", "--server-url", "http://a:1"]) == ["http://a:1"]
    assert server_urls(RUN) == [DEFAULT_SERVER]
    assert server_urls([*RUN, "--config", "gen-tui.toml"]) == []
