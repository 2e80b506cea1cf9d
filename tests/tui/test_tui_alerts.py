"""The control panel pings on what a night's run needs a person for: a dataset turning
stale and a host lost, once per episode, to the bell and to the `[alerts]` URLs."""

from __future__ import annotations

import time
from typing import Any

from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.alerts import AlertConfig
from gen_tui.backends.hosts.ssh_target import SSHOptions
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot
from tests.support.tui import Notes


def _quiet(name: str, last_record_at: float) -> RunSnapshot:
    snap = DatasetSnapshot(
        name=name, state=DatasetState.ACTIVE, tokens=10, samples=1, max_tokens=10**6,
        max_samples=None, budget_mode="predictive", inflight=4, errors=0, malformed=0,
        mean_tokens=10.0, tok_s=0.0, samples_s=0.0, eta_s=None, resumed_tokens=0,
        resumed_samples=0, started_at=0.0, updated_at=last_record_at,
        last_record_at=last_record_at, pid=4242, host="gpu",
    )  # fmt: skip
    return RunSnapshot(
        datasets=(snap,), concurrency=4, inflight=4, utilisation=1.0, elapsed_s=1.0,
        active_s=1.0, stopping=False, paused=False,
    )  # fmt: skip


async def test_stale_and_a_lost_host_ping_the_target_once_each(
    hook: tuple[str, list[dict[str, Any]]], tmp_path: Any
) -> None:
    url, received = hook
    source = StaticSnapshot(["B2"], stale_after_s=1)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    lost = host_source("me@127.0.0.1:1", "/x", options=SSHOptions(known_hosts=str(known_hosts)))
    app = GenTuiApp(None, hosts=[lost], sources=[source], alerts=AlertConfig(urls=(url,)))
    rings: list[str] = []
    app.bell = lambda: rings.append("bell")  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        source.show(_quiet("B2", time.time() - 120), now=time.time() - 60)
        source.show(_quiet("B2", time.time() - 120))  # seen active a minute: stale now

        def titles() -> list[str]:
            return [alert["title"] for alert in received]

        await wait_until(
            lambda: (
                any("B2 is stale" in t for t in titles())
                and any("host me@127.0.0.1:1 lost" in t for t in titles())
            ),
            30,
            "both alerts at the target",
            pause=pilot.pause,
        )
        await pilot.pause(3)  # several refreshes and reconnect attempts later
    assert sum("B2 is stale" in t for t in titles()) == 1, titles()
    assert sum("lost" in t for t in titles()) == 1, titles()
    stale = next(alert for alert in received if "stale" in alert["title"])
    assert "no new record" in stale["message"]
    assert len(rings) >= 2


async def test_a_failing_target_is_shown_by_service_and_host_only_in_the_panel() -> None:
    """Issue 30, point 8: the line that says an alert could not be sent (the events pane;
    no toast may quote more) names the service and the host, never a header, a payload
    value or a topic from the URL."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"json://127.0.0.1:{port}/x?+Authorization=Bearer%20TOASTSECRET&-key=TOASTSECRET"
    source = StaticSnapshot(["B2"], stale_after_s=1)
    notes = Notes()
    app = GenTuiApp(None, sources=[source], alerts=AlertConfig(urls=(url,)))
    app.bell = lambda: None  # type: ignore[method-assign]

    def failures() -> list[str]:
        return [text for _, text in app.events if "could not be sent" in text]

    async with app.run_test(size=(100, 30), message_hook=notes) as pilot:
        source.show(_quiet("B2", time.time() - 120), now=time.time() - 60)
        source.show(_quiet("B2", time.time() - 120))  # stale now: an alert, which fails
        await wait_until(failures, 30, "the failure line", pause=pilot.pause)
    (line,) = failures()
    assert f"json at 127.0.0.1:{port}" in line
    said = " ".join(f"{title} {message}" for title, message, _ in notes.items)
    assert "TOASTSECRET" not in line + said + " ".join(text for _, text in app.events)
