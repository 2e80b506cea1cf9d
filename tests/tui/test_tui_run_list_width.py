"""Issue 31, the retry at 160x48: a stray "▌" stayed at column 69 of the run list. It was
the end of the list's horizontal scrollbar thumb: the demo's B9 command is wider than the
screen, the table scrolled sideways, and in tmux's 256 colours the thumb (dark teal on
black) showed as nothing but its partial end cell. The command is now drawn cut with an ellipsis
to the width left (`i` shows it whole): no sideways scroll, no scrollbar, no stray cell."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gen_tui.widgets.run_table import RunRow, RunTable
from tests.support.polling import wait_until

COMMAND = (
    "/work/gen-tui/.venv/bin/python3 -m gen_tui.app.cli run --prompts-dir "
    "/tmp/gen-tui-demo-c1or3qwj/prompts-stale --tokenizer /tmp/gen-tui-demo-c1or3qwj/tokenizer "
    "--output-dir /tmp/gen-tui-demo-c1or3qwj/output --server-url http://127.0.0.1:38303 "
    "--plain --datasets B9_stale --concurrency 1 --max-new-tokens 16384 --grace 10"
)
ROW = RunRow("vm-1", "vm", 23178, "writing", 59.0, ("B9_stale",), COMMAND)
SCROLLBAR_ENDS = set("▏▎▍▌▋▊▉")


class ListApp(App[None]):
    CSS = "RunTable { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield RunTable(id="runs")


async def test_a_long_command_fits_the_run_list_without_a_scrollbar() -> None:
    app = ListApp()
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(RunTable)
        table.show([ROW])
        await wait_until(lambda: table.row_count == 1, pause=pilot.pause)
        for size in ((160, 48), (120, 36)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            # The screen's lines as drawn: on main the last was 69 cells of thumb, then "▎".
            drawn = [
                "".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()
            ]
            assert not SCROLLBAR_ENDS & set(drawn[-1]), (size, drawn[-1])
            assert not table.show_horizontal_scrollbar, size
            assert table.virtual_size.width <= table.scrollable_content_region.width, size
            row = drawn[1].rstrip()  # the header, then the run: cut at the edge, with "…"
            assert row.endswith("…") and COMMAND[:40] in row and len(row) <= size[0], row
            assert str(table.get_cell("vm-1", "command")) == COMMAND  # kept whole, for `i`
        # A run whose datasets widen their column: the command narrows to make room.
        wider = RunRow("vm-2", "vm", 23179, "writing", 5.0, ("B1_glaive", "B2_sharegpt"), COMMAND)
        table.show([ROW, wider])
        await pilot.pause(0.2)
        assert not table.show_horizontal_scrollbar
        assert table.virtual_size.width <= table.scrollable_content_region.width
