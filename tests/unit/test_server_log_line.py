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


SGLANG_PROBES = [
    '[2026-12-05 07:50:01] INFO:     127.0.0.1:40722 - "GET /health HTTP/1.1" 200 OK',
    '[2026-12-05 07:50:01] INFO:     127.0.0.1:40724 - "GET /get_model_info HTTP/1.1" 200 OK',
    '[2026-12-05 07:50:02] INFO:     127.0.0.1:40730 - "GET /health_generate HTTP/1.1" 503',
    "[2026-12-05 07:50:02] WARNING:  Invalid HTTP request received.",
    "refused a request that is not HTTP/1.1 (400 BadHttpMessage) from 127.0.0.1",  # the sim
    "\x1b[2m2026-12-06 01:59:41\x1b[0m INFO http_request{method=GET uri=/health "
    'version=HTTP/1.1 module="smg" status_code=200 latency=33}: finished processing request',
]


def test_probes_are_never_the_last_line() -> None:
    """The router probes its workers every few seconds (health, model info, an HTTP/2
    preface), and the supervisor probes the router: a probe was a routed server's last
    line almost always. The line before them is the server's own."""
    real = '[2026-12-05 07:49:58] INFO:     127.0.0.1:40700 - "POST /generate HTTP/1.1" 200 OK'
    assert last_of([real, *SGLANG_PROBES, ""]) == real
    assert last_of(SGLANG_PROBES) == ""
    # A request of a path that only starts like one is the server's.
    said = '[2026-12-05 07:50:03] INFO:     127.0.0.1:4 - "GET /healthz_custom HTTP/1.1" 404'
    assert last_of([*SGLANG_PROBES, said]) == said
