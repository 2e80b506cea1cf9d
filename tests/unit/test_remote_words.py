"""One word of a remote command line: what may go on one, refused by name before any
command reaches the host (the csh/tcsh runs of tests/integration/test_remote_shells.py
need those shells installed; this runs everywhere)."""

from __future__ import annotations

import pytest

from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.scripts import check_remote_word, remote_quote


def test_utf8_words_pass_and_bang_is_taken_out_of_the_quotes() -> None:
    assert check_remote_word("/data/Über/B1", "the folder") == "/data/Über/B1"
    assert remote_quote("a!b") == "'a'\\!'b'"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("/data/x\ntouch /tmp/PWNED", "line break or NUL"),
        ("py\0", "line break or NUL"),
        # A process's argv byte 0xc3 with nothing after it, as surrogateescape decodes it:
        # sent as UTF-8 it would not be the same bytes (asyncssh refuses to encode it).
        ("/data/out\udcc3", "out\ufffd holds bytes that are not UTF-8"),
    ],
)
def test_a_word_that_cannot_go_on_a_remote_line_is_refused_by_name(value: str, words: str) -> None:
    with pytest.raises(RunError, match=words) as caught:
        remote_quote(value, "the output folder")
    assert str(caught.value).startswith("the output folder ")
    str(caught.value).encode("utf-8")  # the refusal itself can be shown
