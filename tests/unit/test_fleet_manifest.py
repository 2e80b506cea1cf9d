"""A mixed fleet's dataset manifest (issue 34): export and verify check each record by its
own lane's API, and a resume that changed what makes the records is refused in one line
naming the field and the lanes of both runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.store.manifest import (
    ManifestError,
    RunSetup,
    native_ids,
    read_manifest,
    record_setup,
)

FLEET = [
    "box=http://10.0.0.5:30000,api=sglang,price=0/0",
    "api=https://openrouter.ai/api,api=openai,price=0.2/0.94",
]


def setup(servers: list[str], api: str, sampling: dict[str, int]) -> RunSetup:
    return RunSetup("/p/A.jsonl", "0" * 64, "/tok", None, sampling, api, "m", servers)


def test_a_records_own_api_decides_over_the_runs() -> None:
    assert native_ids({"api": "sglang"}, "openai+sglang")
    assert not native_ids({"api": "openai"}, "openai+sglang")
    assert native_ids({}, "sglang") and not native_ids({}, "openai")
    assert native_ids({}, None)  # no manifest: checked as the server's ids


def test_a_resume_with_other_sampling_is_refused_naming_the_field_and_the_lanes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "A"
    folder.mkdir()
    record_setup(folder, "A", setup(FLEET, "openai+sglang", {"temperature": 1}), 0)
    record_setup(folder, "A", setup(FLEET[:1], "openai+sglang", {"temperature": 0}), 10)
    with pytest.raises(ManifestError) as caught:
        read_manifest(folder).single_setup()
    said = str(caught.value)
    assert "\n" not in said
    assert "different sampling (lanes box, api and lane box: a resume changed them)" in said


def test_the_same_setup_over_other_lanes_is_one_setup(tmp_path: Path) -> None:
    folder = tmp_path / "A"
    folder.mkdir()
    record_setup(folder, "A", setup(FLEET, "openai+sglang", {"temperature": 1}), 0)
    record_setup(folder, "A", setup(FLEET[:1], "openai+sglang", {"temperature": 1}), 10)
    assert read_manifest(folder).single_setup().servers == FLEET


def test_plain_servers_are_named_by_url(tmp_path: Path) -> None:
    folder = tmp_path / "A"
    folder.mkdir()
    record_setup(folder, "A", setup(["http://a:1"], "sglang", {"temperature": 1}), 0)
    record_setup(folder, "A", setup(["http://b:2"], "openai", {"temperature": 1}), 10)
    with pytest.raises(ManifestError, match=r"different api \(server http://a:1 and server"):
        read_manifest(folder).single_setup()


def test_a_box_only_run_resumed_as_a_fleet_is_one_setup(tmp_path: Path) -> None:
    """Issue 34: the box-only run's records carry no `api`: they are its manifest's
    (`sglang`), and the fleet's name their own; only the api differs, so it is one setup."""
    folder = tmp_path / "A"
    folder.mkdir()
    record_setup(folder, "A", setup(["http://10.0.0.5:30000"], "sglang", {"temperature": 1}), 0)
    record_setup(folder, "A", setup(FLEET, "openai+sglang", {"temperature": 1}), 10)
    first = read_manifest(folder).single_setup()
    assert first.api == "sglang"  # a record without `api` is checked as the box's
    assert native_ids({}, first.api) and not native_ids({"api": "openai"}, first.api)
    # Anything else changed is still refused, and a plain run after a fleet too: its
    # records name no API, so they could not be told from the fleet's.
    record_setup(folder, "A", setup(FLEET, "openai+sglang", {"temperature": 0}), 20)
    with pytest.raises(ManifestError, match="different sampling"):
        read_manifest(folder).single_setup()
    other = tmp_path / "B"
    other.mkdir()
    record_setup(other, "B", setup(FLEET, "openai+sglang", {"temperature": 1}), 0)
    record_setup(other, "B", setup(["http://b:2"], "openai", {"temperature": 1}), 10)
    with pytest.raises(ManifestError, match="different api"):
        read_manifest(other).single_setup()
