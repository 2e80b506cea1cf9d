"""A batch lane in a mixed fleet's config (issues 33 and 34): `[run] lanes` takes the batch
provider as a lane like the live ones; it is no live server (the runner never sends it a
live request), its client is the Batch API's, and a run takes one batch lane at most."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.clients import BatchClient, FleetClient, SGLangClient, client_for
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError

CONFIG = """
[run]
model = "m"
deadline = "8h"
max_cost = 60
lanes = [
    "box=http://gpu-box:30000",
    "batch=https://api.example.com,api=openai-batch,price=0.1/0.47,turnaround=2h",
]
"""


def test_a_batch_lane_in_the_config_is_the_fleets_batch_lane(tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text(CONFIG)
    run = load_config(path).run
    config = EngineConfig(datasets=[DatasetSpec("A", tmp_path / "A.jsonl")], **run)
    batch = config.batch_lane
    assert batch is not None and batch.name == "batch" and batch.batch
    assert batch.turnaround_s == 7200 and batch.price_per_token == pytest.approx(0.47e-6)
    assert config.server_urls == ["http://gpu-box:30000"]  # the live lanes alone
    assert config.max_concurrency == config.lane_concurrency(config.fleet[0])
    client = client_for(config)
    assert isinstance(client, FleetClient)
    assert isinstance(client.api("https://api.example.com"), BatchClient)
    assert isinstance(client.api("http://gpu-box:30000"), SGLangClient)


def test_two_batch_lanes_are_refused_in_one_line_naming_why(tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        CONFIG.replace(
            '"box=http://gpu-box:30000",',
            '"box=http://gpu-box:30000", "b2=https://other.example.com,api=openai-batch",',
        )
    )
    with pytest.raises((ConfigError, EngineError)) as caught:
        run = load_config(path).run
        EngineConfig(datasets=[DatasetSpec("A", tmp_path / "A.jsonl")], **run)
    said = str(caught.value)
    assert "\n" not in said
    assert "lanes b2 and batch are both api=openai-batch: a run takes one batch lane" in said
