"""The run list shows other users' command lines as plain, visible text."""

from textual.app import App, ComposeResult

from gen_tui.widgets.run_table import RunRow, RunTable

HOSTILE = "python run_inference.py [/x] [bold]x[/] \x1b]52;c;ZWNobw==\x07 --datasets B1"


class _ListApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RunTable()


def _row(command: str, state: str = "writing") -> RunRow:
    return RunRow("h:1", "gpu[/b]", 4242, state, 75.0, ("B1[/i]",), command)


async def test_markup_and_escapes_in_a_command_line_are_shown_as_text() -> None:
    app = _ListApp()
    async with app.run_test() as pilot:
        table = app.query_one(RunTable)
        table.show([_row(HOSTILE)])
        await pilot.pause()
        table.show([_row(HOSTILE + " [/y]", state="stopping 3s")])  # the update path
        await pilot.pause()
        cells = [str(cell) for cell in table.get_row("h:1")]
    assert app.return_code is None  # still running: the markup did not end the app
    assert cells[0] == "gpu[/b]" and cells[4] == "B1[/i]" and cells[2] == "stopping 3s"
    assert cells[5].startswith("python run_inference.py [/x] [bold]x[/] \ufffd]52;c;ZWNobw==")
    assert "\x1b" not in cells[5] and "\x07" not in cells[5] and cells[5].endswith("[/y]")
