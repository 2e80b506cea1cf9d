"""A server's last log line as `gen-tui servers status` and the servers view show it: its
colours dropped so it reads (sglang-router colours every line: the status showed
`�[2m2026-12-05 07:49:18�[0m �[32m INFO...`), every other escape still shown as a symbol."""

from __future__ import annotations

from gen_tui.backends.servers.process import last_of

ROUTER = (
    "\x1b[2m2026-12-05 07:49:18\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mhttp_request\x1b[0m"
    "\x1b[1m{\x1b[0m\x1b[3mmethod\x1b[0m\x1b[2m=\x1b[0mGET\x1b[1m}\x1b[0m"
)


def test_a_coloured_line_reads_as_its_text() -> None:
    assert last_of([ROUTER, "  "]) == "2026-12-05 07:49:18  INFO http_request{method=GET}"


def test_other_escapes_stay_visible_and_harmless() -> None:
    line = last_of(["clipboard \x1b]52;c;ZXZpbA==\x07 clear \x1b[2J title \x1b]0;x\x07"])
    assert "\x1b" not in line and "\x07" not in line
    assert "52;c;ZXZpbA==" in line and "[2J" in line  # shown, not obeyed nor hidden
