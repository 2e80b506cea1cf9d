"""How a server's error body is quoted: its message when one can be read, else its head,
saying what was left out, so a quote is never taken for the whole message (issue 16)."""

from __future__ import annotations

import orjson
import pytest

from gen_tui.backends.clients.limits import ERROR_BODY_BYTES
from gen_tui.backends.clients.wire import BodyHead, error_message, status_failure
from gen_tui.backends.untrusted import QUOTED_BODY_BYTES, quote_body

PAGE = b"<html><head><title>502 Bad Gateway</title></head><body>" + b"x" * 1000 + b"</body>"


def test_a_short_body_is_quoted_whole_and_says_nothing_more() -> None:
    assert quote_body(b"  upstream timed out\n", 21) == "upstream timed out"
    assert error_message(BodyHead.whole(b"upstream timed out")) == "upstream timed out"


def test_a_long_body_read_whole_says_how_many_bytes_it_cut() -> None:
    quoted = error_message(BodyHead.whole(PAGE))
    cut = len(PAGE) - QUOTED_BODY_BYTES
    assert quoted == PAGE[:QUOTED_BODY_BYTES].decode() + f"… (+{cut:,} bytes cut)"


def test_a_body_cut_at_the_read_bound_with_a_declared_size_says_the_rest() -> None:
    head = b'{"error": {"message": "' + b"E" * ERROR_BODY_BYTES
    quoted = error_message(BodyHead(head[:ERROR_BODY_BYTES], 1_048_600))
    assert quoted.startswith('{"error": {"message": "EEE')
    assert quoted.endswith(f"… (+{1_048_600 - QUOTED_BODY_BYTES:,} bytes cut)")


def test_a_body_cut_at_the_read_bound_of_unknown_size_says_it_went_on() -> None:
    head = (b'{"error": {"message": "' + b"E" * ERROR_BODY_BYTES)[:ERROR_BODY_BYTES]
    quoted = error_message(BodyHead(head, None))
    assert quoted.endswith(f"… (body over 64 KiB, first {QUOTED_BODY_BYTES} bytes)")
    assert len(quoted) < QUOTED_BODY_BYTES + 60


def test_a_whole_json_message_is_the_message_even_when_padding_was_cut() -> None:
    """A JSON object that parses from the head is whole: only white space followed it."""
    message = "model m not found"
    head = orjson.dumps({"error": {"message": message}}) + b" " * ERROR_BODY_BYTES
    assert error_message(BodyHead(head[:ERROR_BODY_BYTES], None)) == message
    assert error_message(BodyHead.whole(orjson.dumps({"detail": "no"}))) == "no"


def test_a_cut_body_that_still_parses_as_a_number_is_a_quote() -> None:
    """`12345` cut from `123456789...` parses: it is no whole message."""
    assert error_message(BodyHead(b"12345", 9000)) == "12345… (+8,995 bytes cut)"


def test_a_cut_inside_a_multibyte_character_is_no_error() -> None:
    body = "é".encode() * 200
    quoted = quote_body(body, len(body))
    assert quoted.startswith("é" * 100) and quoted.endswith("(+200 bytes cut)")


@pytest.mark.parametrize(("status", "retry"), [(500, True), (400, False), (401, False)])
def test_every_status_carries_the_same_quote(status: int, retry: bool) -> None:
    failure = status_failure(status, BodyHead(PAGE[:100], len(PAGE)), {})
    assert failure.reason.startswith(f"HTTP {status}")
    assert f"(+{len(PAGE) - 100:,} bytes cut)" in failure.reason
    assert failure.retry is retry
