"""The servers view under Pilot (issue 32): a config of `gen-tui sim` servers, the panel
that supervises them, and how the tests read the view's rows."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from gen_tui.app.dialogs.servers import ServersScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.file import load_config
from gen_tui.widgets.server_strip import ServerStrip
from gen_tui.widgets.server_table import COLUMNS, ServerTable
from tests.support.polling import wait_until
from tests.support.runs import GEN_TUI


def sim_config(
    path: Path,
    servers: dict[str, int],
    *,
    backoff_s: float = 3.0,
    alerts: str = "",
    devices: dict[str, str] | None = None,
) -> Path:
    """A gen-tui.toml whose `[[servers]]` are `gen-tui sim`s, by name -> port (`alerts`: an
    `[alerts]` URL; `devices`: a CUDA_VISIBLE_DEVICES by name, which the sim ignores)."""
    text = f'[alerts]\nurls = ["{alerts}"]\n' if alerts else ""
    for name, port in servers.items():
        argv = [*GEN_TUI, "sim", "--port", str(port), "--tokens-per-s", "2000"]
        words = ", ".join(f'"{word}"' for word in argv)
        device = (devices or {}).get(name)
        gpus = f', CUDA_VISIBLE_DEVICES = "{device}"' if device is not None else ""
        text += (
            f'[[servers]]\nname = "{name}"\nargv = [{words}]\nport = {port}\n'
            f"startup_s = 60\nunhealthy_s = 10\nbackoff_s = {backoff_s}\n"
            f'max_restarts_per_hour = 5\nenv = {{ PYTHONUNBUFFERED = "1"{gpus} }}\n'
        )
    path.write_text(text)
    return path


def panel(config: Path) -> GenTuiApp:
    """The panel over `config` (no run of its own), supervising its servers."""
    file = load_config(config)
    return GenTuiApp(None, server_config=file, alerts=file.alerts)


def strip_text(app: GenTuiApp) -> str:
    """The server strip under the header, as drawn ("" while hidden)."""
    strip = app.query_one("#servers", ServerStrip)
    return str(strip.render()) if strip.display else ""


def cell(app: GenTuiApp, name: str, column: str) -> str:
    """A cell of the servers view's row of `name` ("" while not listed)."""
    table = app.screen.query_one(ServerTable)
    cells = table.cells(name)
    return cells[COLUMNS.index(column)] if cells is not None else ""


async def open_view(app: GenTuiApp, pilot: Pilot[int]) -> None:
    await pilot.press("S")
    await wait_until(lambda: isinstance(app.screen, ServersScreen), 10, "the servers view")


async def until_state(
    app: GenTuiApp, pilot: Pilot[int], name: str, word: str, timeout: float = 90
) -> str:
    """Wait until `name`'s state cell starts with `word`; its pid/job cell then."""
    await wait_until(
        lambda: cell(app, name, "state").startswith(word),
        timeout,
        f"{name} {word}",
        pause=pilot.pause,
        detail=lambda: f"{name}: {cell(app, name, 'state')!r} | {cell(app, name, 'last log line')}",
    )
    return cell(app, name, "pid/job")
