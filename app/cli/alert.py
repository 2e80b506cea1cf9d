"""`gen-tui alert [--test]`, and the alerts of a headless `gen-tui run`.

The alerts are configured in the TOML's `[alerts]` table (see backends/alerts.py); a run
started with `--config FILE` sends them, and `gen-tui alert --test` checks that they arrive.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.app.cli.examples import examples
from gen_tui.app.cli.exits import EXIT_OK, EXIT_USAGE
from gen_tui.app.cli.output import error
from gen_tui.backends.alerts import AlertConfig, Alerter, AlertEvent, shown_target
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.untrusted import one_line

TEST_WAIT_S = 30.0
"""How long `alert --test` waits for every URL to answer (apprise's own timeouts are less)."""


def add_alert(commands: argparse._SubParsersAction[Any]) -> None:
    alert = commands.add_parser(
        "alert",
        help="send a test alert to the [alerts] URLs of a config",
        description="Alerts go to the apprise URLs in the config's [alerts] table (urls = "
        '["ntfy://topic", ...], events = ["budget", "stale", "failed", "credits", '
        '"disk_full", "host_lost", "ended", "server"]). --test sends one now.',
        **examples("alert"),
    )
    alert.add_argument(
        "--test",
        action="store_true",
        help="send a test alert now (without it: say where alerts go and on which events)",
    )
    alert.add_argument(
        "--config",
        type=Path,
        dest="alert_config",
        help="the TOML with [alerts] (default ./gen-tui.toml, then the user config)",
    )


def alert_main(args: argparse.Namespace) -> int:
    from gen_tui.backends.config.file import find_config

    path = args.alert_config or find_config()
    if path is None:
        error("no config: give --config FILE with an [alerts] table")
        return EXIT_USAGE
    try:
        alerts = load_config(path).alerts
    except ConfigError as exc:  # every line names the path: through the untrusted-text rule
        error(str(exc))
        return EXIT_USAGE
    if not alerts.urls:
        error(f"{path} has no [alerts] urls")
        return EXIT_USAGE
    if not args.test:
        # Nothing is sent unasked: say what the config gives, and how to try it.
        targets = ", ".join(shown_target(url) for url in alerts.urls)
        events = ", ".join(str(event) for event in AlertEvent if event in alerts.events)
        print(
            one_line(
                f"{path}: alerts go to {targets} on {events or 'no event'}; "
                f"gen-tui alert --test --config {path} sends a test alert now"
            )
        )
        return EXIT_OK
    said: list[str] = []
    alerter = Alerter(alerts, on_failure=said.append, in_a_run=False)
    future = alerter.send(
        AlertEvent.TEST,
        f"gen-tui on {socket.gethostname()}: test",
        "a test alert from gen-tui alert --test: alerts reach you",
    )
    assert future is not None
    ok = future.result(timeout=TEST_WAIT_S)
    alerter.close()
    if not ok:
        return error(said[0] if said else "the alert was not sent")
    print(f"sent a test alert to {len(alerts.urls)} URL(s)")
    return EXIT_OK


def alerts_of(config: Path | None) -> AlertConfig:
    """The `[alerts]` of a run's --config (none without one). Raises ConfigError."""
    return load_config(config).alerts if config is not None else AlertConfig()


Say = Callable[[str, str], None]
"""(level, message): a line in the run's log."""


class RunAlerts:
    """The alerts of one headless run: engine events in, apprise out, failures to the log."""

    def __init__(self, config: AlertConfig, say: Say) -> None:
        self._say = say
        self._loop = asyncio.get_running_loop()
        self._host = socket.gethostname()
        self.alerter = Alerter(config, on_failure=self._failed)

    def _failed(self, message: str) -> None:
        try:  # said on the run's loop, like every other event
            self._loop.call_soon_threadsafe(self._say, "warning", message)
        except RuntimeError:  # the loop is closed: the run is over
            print(f"gen-tui: warning: {message}", file=sys.stderr, flush=True)

    def __call__(self, event: AlertEvent, message: str) -> None:
        self.alerter.send(event, f"gen-tui on {self._host}: {event}", message)

    async def close(self) -> None:
        """Let the last alerts (the run's end) go out, off the loop."""
        await asyncio.to_thread(self.alerter.close)
