"""`gen-tui servers`' arguments, apart from the command itself (app/cli/servers.py): the
parser is built at every start of gen-tui, and the command's imports (aiohttp, asyncssh,
the supervisor) must not slow the panel's first frame (tests/tui/test_tui_launch.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gen_tui.app.cli.examples import examples

ACTIONS = ("up", "status", "stop", "restart")


def add_servers(commands: argparse._SubParsersAction[Any]) -> None:
    servers = commands.add_parser(
        "servers",
        help="start, watch and restart the config's [[servers]] (up, status, stop, restart)",
        description="The servers of the config's [[servers]] and [router] tables: `up` "
        "starts (or adopts) them and restarts one that dies, until Ctrl-C (they run on); "
        "`status`, `stop` and `restart` act on the named ones. See docs/servers.md.",
        **examples("servers"),
    )
    servers.add_argument(
        "--config",
        type=Path,
        dest="servers_config",
        help="the TOML with [[servers]] (default ./gen-tui.toml, then the user config)",
    )
    actions = servers.add_subparsers(
        dest="servers_action", required=True, parser_class=type(servers)
    )
    for action, said in (
        ("up", "start or adopt them and keep them up until Ctrl-C"),
        ("status", "a line per server: state, pid, uptime, restarts, last log line"),
        ("stop", "stop them (SIGTERM, then SIGKILL after the grace)"),
        ("restart", "stop them and start them anew, waiting until healthy"),
    ):
        parser = actions.add_parser(action, help=said, description=said)
        parser.add_argument("names", nargs="*", help="recipe names (default: every server)")
