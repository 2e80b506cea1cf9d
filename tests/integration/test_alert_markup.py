"""Someone else's text in an alert reaches a push target as text, never as a link or HTML.

An alert quotes what a server or a file said (a `failed` alert's error message, a
dataset's reason). Sent with no format, apprise hands it to an HTML target (e-mail,
Telegram, a `?format=html` URL) or a Markdown one (Discord, Matrix) as it is: a server's
`<a href=...>sign in again</a>` or `[sign in again](http://...)` became a working link in
the alert, under the name of gen-tui. Real apprise, a real HTTP target of the test's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gen_tui.backends.alerts import AlertConfig, Alerter, AlertEvent

HTML = '<a href="http://evil.example/login">sign in again</a><img src="http://evil.example/t">'
MARKDOWN = "[sign in again](http://evil.example/login) ![t](http://evil.example/t)"


@pytest.mark.parametrize(
    ("fmt", "unsafe", "shown"),
    [
        ("html", '<a href="', "&lt;a&nbsp;href=&quot;http://evil.example/login&quot;&gt;"),
        ("markdown", "[sign in again](", r"\[sign in again\]\(http://evil\.example/login\)"),
    ],
)
async def test_a_quoted_error_is_text_in_html_and_markdown_targets(
    hook: Any, fmt: str, unsafe: str, shown: str
) -> None:
    url, received = hook
    alerter = Alerter(AlertConfig.parse({"urls": [f"{url}?format={fmt}"]}))
    future = alerter.send(AlertEvent.FAILED, "gen-tui: B2 failed", f"HTTP 401: {HTML} {MARKDOWN}")
    assert future is not None and await asyncio.wait_for(asyncio.wrap_future(future), 10)
    (message,) = [item["message"] for item in received]
    assert unsafe not in message, message
    assert shown in message, message
