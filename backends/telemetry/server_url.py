"""Which server URLs gen-tui will ask a host to fetch `/metrics` from, and how many.

The rule lives once: a run's `--server-url` (hosts/argv.py) and a `[[hosts]]` entry's
`servers` (config.py) pass the same check. Plain http(s) URLs only, because the URL goes on
the watcher's remote command line (no quoting games, no `file:` reads on the box) and is
shown in the panel.
"""

from __future__ import annotations

import re

PLAIN_URL = re.compile(r"\Ahttps?://[A-Za-z0-9.\-_:\[\]]{1,255}(/[A-Za-z0-9._~/\-]{0,200})?\Z")
"""scheme://host[:port][/path]: nothing a shell or a URL parser could take two ways (another
user's command line is untrusted); no query, no credentials, no spaces or controls."""

MAX_HOST_SERVERS = 16
"""Servers a `[[hosts]]` entry may name: the remote watcher reads at most this many
(watcher.MAX_METRICS_URLS, which must stay stdlib-only and so keeps its own copy)."""


def plain_url(text: str) -> str | None:
    """`text` without a trailing slash when it is a plain http(s) URL, else None."""
    return text.rstrip("/") if PLAIN_URL.match(text) else None
