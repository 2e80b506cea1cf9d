"""What other people's text looks like once gen-tui has cleaned it for a terminal or a log."""

import shlex

import pytest

from gen_tui.backends.untrusted import clean, one_line, truncate

ATTACKS = [
    "\x1b]0;pwned\x07",  # OSC window title
    "\x1b]52;c;ZWNobyBoaQ==\x07",  # OSC 52 clipboard write
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x9b31m",  # C1 CSI
    "\x1bP+q\x1b\\",  # DCS request
    "run\u202etxt.exe",  # right-to-left override
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_escape_or_bidi_control_survives(attack: str) -> None:
    for shown in (clean(attack), one_line(attack)):
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown), repr(shown)
        assert "\u202e" not in shown
        assert "\ufffd" in shown  # the place of the control is still visible


def test_clean_keeps_tabs_and_newlines_and_one_line_folds_them() -> None:
    assert clean("a\tb\nc") == "a\tb\nc"
    assert one_line("a\tb\r\nc") == "a b  c"


def test_size_is_bounded_and_the_cut_said() -> None:
    assert truncate("x" * 10, 10) == "x" * 10
    assert truncate("x" * 25, 10) == "x" * 10 + "… (15 more characters)"
    assert clean("y" * 1_000_000, 100).startswith("y" * 100 + "… (999,900 more")


def test_the_headless_log_shows_a_hostile_server_message_as_one_plain_line() -> None:
    import io

    from gen_tui.app.cli.headless import HeadlessDisplay

    stream = io.StringIO()
    display = HeadlessDisplay(stream)
    display.event(
        "warning", "model x not found\x1b]0;owned\x07\n12:00:00 info: all done" + "z" * 5000
    )
    (line,) = stream.getvalue().splitlines()
    assert "\x1b" not in line and "\x07" not in line
    assert "not found\ufffd]0;owned\ufffd 12:00:00 info: all done" in line
    assert line.endswith("more characters)") and len(line) < 2200


def test_bytes_that_are_not_utf8_are_shown_as_replacement_characters() -> None:
    """A command line or path with bytes that are not UTF-8 reaches us as surrogate escapes
    (so a kill's identity check and a relaunch see the real bytes); no terminal encoding
    can write those, and the run list showed them as '\\udcff' text."""
    argv = [b"python3", b"run_inference.py", b"\xff\xfe", b"--output-dir", b"/data/out\xc3"]
    command = shlex.join(arg.decode("utf-8", "surrogateescape") for arg in argv)
    shown = one_line(command)
    assert shown == "python3 run_inference.py '\ufffd\ufffd' --output-dir '/data/out\ufffd'"
    shown.encode("utf-8")  # writable to a terminal
    assert clean("a\ud800b") == "a\ufffdb"
