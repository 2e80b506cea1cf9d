"""Alerts reach a stub push target (apprise's json:// to an HTTP server of the test's own),
from `gen-tui alert --test` and from a real `gen-tui run`; a target that fails is said
once and never stops the run."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import finish, run_args, spawn


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(path: Path, *urls: str, events: str = "") -> Path:
    quoted = ", ".join(f'"{url}"' for url in urls)
    path.write_text(f"[alerts]\nurls = [{quoted}]\n{events}")
    return path


async def test_alert_test_reaches_the_target(hook: Any, tmp_path: Path) -> None:
    url, received = hook
    config = write_config(tmp_path / "gen-tui.toml", url)
    code, stdout, stderr = await finish(await spawn("alert", "--test", "--config", str(config)))
    assert code == 0, stderr
    assert "sent a test alert to 1 URL(s)" in stdout
    assert len(received) == 1
    assert received[0]["title"].endswith(": test") and "alerts reach you" in received[0]["message"]


async def test_alert_test_to_a_dead_target_is_one_clear_line(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", f"json://user:secret@127.0.0.1:{closed_port()}/x")
    code, _, stderr = await finish(await spawn("alert", "--test", "--config", str(config)))
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gen-tui: error: an alert could not be sent")
    assert "secret" not in stderr, "a URL's secret never reaches the terminal"


async def test_a_failing_target_shows_its_service_and_host_only(tmp_path: Path) -> None:
    """Issue 30, point 8: headers, payload values, paths and ntfy topics are secrets."""
    port = closed_port()
    config = write_config(
        tmp_path / "c.toml",
        f"json://127.0.0.1:{port}/hook?+Authorization=Bearer%20HEADERSECRET&-api_key=PARAMSECRET",
        f"ntfy://127.0.0.1:{port}/TOPICSECRET",
        f"jsons://user:PASSSECRET@127.0.0.1:{port}/PATHSECRET",
    )
    code, stdout, stderr = await finish(await spawn("alert", "--test", "--config", str(config)))
    assert code == 1
    assert "SECRET" not in stdout + stderr, stderr
    assert f"json at 127.0.0.1:{port}" in stderr and f"ntfy at 127.0.0.1:{port}" in stderr
    assert f"jsons at 127.0.0.1:{port}" in stderr
    assert len(stderr.strip().splitlines()) == 1


async def test_a_bad_alerts_table_is_named(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", "json://127.0.0.1:1/x", events='events = ["nap"]\n')
    code, _, stderr = await finish(await spawn("alert", "--test", "--config", str(config)))
    assert code == 2
    assert stderr.strip() == (
        f"gen-tui: error: {config}: alerts.events: unknown event 'nap' (known: budget, stale, "
        "failed, credits, disk_full, host_lost, ended, server)"
    )


@pytest.mark.quick
async def test_a_run_pings_budget_and_end_and_survives_a_dead_target(
    hook: Any, tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    url, received = hook
    port = closed_port()
    dead = f"json://127.0.0.1:{port}/x?+Authorization=Bearer%20RUNSECRET&-api_key=RUNSECRET"
    config = write_config(tmp_path / "c.toml", url, dead)
    server = await sim(tokens_per_s=20000, slots=16)
    args = run_args(tokenizer_dir, prompts_dir(A=200), tmp_path / "out", server.url)
    process = await spawn(*args, "--config", str(config), "--max-tokens-per-dataset", "3000")
    code, stdout, stderr = await finish(process)
    assert code == 0, stderr
    titles = [alert["title"].rsplit(": ", 1)[1] for alert in received]
    assert titles == ["budget", "ended"], received
    assert "A reached its budget" in received[0]["message"]
    assert received[1]["message"].startswith("summary: ")
    assert stdout.count("an alert could not be sent") + stderr.count("could not be sent") == 1
    assert f"json at 127.0.0.1:{port}" in stdout + stderr
    assert "RUNSECRET" not in stdout + stderr, "the log shows the service and host only"


async def test_alert_without_test_says_where_alerts_go_and_sends_nothing(
    hook: Any, tmp_path: Path
) -> None:
    """Issue 31, defect 15: `gen-tui alert --config X` alone is no usage error."""
    url, received = hook
    port = closed_port()
    config = write_config(tmp_path / "c.toml", url, f"ntfy://127.0.0.1:{port}/TOPICSECRET")
    code, stdout, stderr = await finish(await spawn("alert", "--config", str(config)))
    assert code == 0, stderr
    assert stderr == "" and len(stdout.strip().splitlines()) == 1, stdout
    assert f"ntfy at 127.0.0.1:{port}" in stdout and "--test" in stdout
    assert "TOPICSECRET" not in stdout
    assert received == [], "nothing is sent without --test"


async def test_alert_test_to_a_dead_target_says_no_run_goes_on(tmp_path: Path) -> None:
    """Issue 31, defect 15: `alert --test` has no run: its failure line does not speak of
    one, and names the target by its service and host."""
    port = closed_port()
    config = write_config(tmp_path / "c.toml", f"json://127.0.0.1:{port}/x?-key=SECRET")
    code, _, stderr = await finish(await spawn("alert", "--test", "--config", str(config)))
    assert code == 1
    assert f"json at 127.0.0.1:{port}" in stderr and "SECRET" not in stderr
    assert "run" not in stderr, stderr
