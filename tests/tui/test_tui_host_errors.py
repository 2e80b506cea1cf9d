"""A host that cannot be watched says so at 80×24: on the board while no panel shows, cut
in the header (never dropped), once per change in the event log, and in full under `l`."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import RichLog, Static

from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts.ssh_target import SSHOptions
from gen_tui.widgets.header import RunHeader
from tests.support.polling import wait_until
from tests.support.tui import log_text


def _text(widget: Static) -> str:
    rendered = widget.render()
    return str(getattr(rendered, "plain", rendered))


@pytest.mark.quick
async def test_a_missing_local_folder_and_a_refused_port_are_visible_at_80x24(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nonexistent"
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    sources = [
        host_source("local", str(missing)),
        host_source("me@127.0.0.1:1", "/x", options=SSHOptions(known_hosts=str(known_hosts))),
    ]
    app = GenTuiApp(None, hosts=sources)
    async with app.run_test(size=(80, 24)) as pilot:
        dashboard = app.dashboard
        assert dashboard is not None
        empty = dashboard.query_one("#empty", Static)

        def both_said() -> bool:
            text = _text(empty)
            return "does not exist" in text and "127.0.0.1" in text and "refused" in text

        await wait_until(both_said, 30, "both hosts said on the board", pause=pilot.pause)
        board = _text(empty)
        assert f"local: output folder {missing} does not exist" in board, board
        assert empty.region.height >= 3 and empty.region.y < 24, "the board text is on screen"

        header = dashboard.query_one(RunHeader).render().plain
        assert "does not exist" in header or "refused" in header or "…" in header, header
        assert len(header) <= 80

        said = log_text(dashboard.query_one("#events", RichLog))
        assert said.count("does not exist") == 1, said  # once, not once per survey

        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
        await pilot.pause(0.2)
        hosts = _text(app.screen.query_one("#runs-hosts", Static))
        assert f"output folder {missing} does not exist" in hosts, hosts
        assert "refused" in hosts.lower(), hosts
        await pilot.press("escape")

        missing.mkdir()  # the user fixes the path: the complaint goes away
        await wait_until(
            lambda: "does not exist" not in _text(empty),
            20,
            "the complaint gone",
            pause=pilot.pause,
        )
