"""What a router says about itself and its workers is untrusted: only a router's own
`router_manager: true` makes a URL a router, and only plain http(s) URLs are workers."""

from __future__ import annotations

from typing import Any

import pytest

from gen_tui.backends.clients.base import Worker
from gen_tui.backends.clients.router import MAX_WORKERS, is_router, worker_url, workers_from


@pytest.mark.parametrize(
    ("info", "router"),
    [
        ({"router_manager": True, "routers_count": 1, "workers_count": 2}, True),
        ({"version": "0.5.23", "max_running_requests": 64}, False),  # a server
        ({"router_manager": "yes"}, False),
        ({"router_manager": 1}, False),
        (None, False),
        ([{"router_manager": True}], False),
    ],
)
def test_only_a_routers_own_answer_makes_a_router(info: Any, router: bool) -> None:
    assert is_router(info) is router


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("http://10.0.0.7:30000", "http://10.0.0.7:30000"),
        ("https://gpu-3.example:8443/", "https://gpu-3.example:8443"),
        ("http://[::1]:30000", "http://[::1]:30000"),
        ("grpc://10.0.0.7:30001", None),
        ("http://", None),
        ("http://host:1\x1b]52;c;aGk=\x07", None),  # a terminal escape in a log line
        ("http://host name:1", None),
        ("http://h/" + "a" * 600, None),
        ("http://[::1:30000", None),  # urlsplit refuses it
        (30000, None),
        (None, None),
    ],
)
def test_a_worker_url_is_plain_http_or_nothing(value: Any, url: str | None) -> None:
    assert worker_url(value) == url


def test_the_listing_keeps_each_worker_once_and_skips_what_is_not_one() -> None:
    listing = {
        "workers": [
            {"url": "http://a:1", "is_healthy": True, "load": 3},
            {"url": "http://b:1/", "is_healthy": False},
            {"url": "http://a:1"},  # the same worker again
            {"url": "ftp://c:1"},
            "http://d:1",
            {"is_healthy": True},
            {"url": "http://e:1"},  # says nothing of its health: taken as healthy
        ],
        "total": 7,
    }
    assert workers_from(listing) == (
        Worker("http://a:1", healthy=True),
        Worker("http://b:1", healthy=False),
        Worker("http://e:1", healthy=True),
    )


@pytest.mark.parametrize("listing", [None, {}, {"workers": "http://a:1"}, [], {"workers": None}])
def test_a_listing_of_another_shape_lists_no_workers(listing: Any) -> None:
    assert workers_from(listing) == ()


def test_a_listing_is_bounded() -> None:
    listing = {"workers": [{"url": f"http://w{i}:1"} for i in range(MAX_WORKERS + 50)]}
    assert len(workers_from(listing)) == MAX_WORKERS
