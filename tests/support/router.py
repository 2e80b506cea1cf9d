"""A real SGLang router (`sglang-router` from PyPI, a Rust binary) in front of simulators.

gen-tui does not depend on it, so it runs from an environment of its own: `.ci/run` builds
one (`.venv-router`) and names its python in GEN_TUI_ROUTER_PYTHON. Without it the tests
that need it are skipped, saying why (see `router_problem`). The benchmarks use the same
launcher.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from gen_tui.backends.config.server_recipe import ServerRecipe
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.side_python import side_python_problem

ROUTER_PYTHON = os.environ.get("GEN_TUI_ROUTER_PYTHON", "")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
START_S = 60.0
"""How long the router may take to list every worker healthy (it probes each in turn)."""


@functools.cache
def router_problem() -> str | None:
    """Why GEN_TUI_ROUTER_PYTHON cannot run the router (None: it can)."""
    return side_python_problem(
        "GEN_TUI_ROUTER_PYTHON",
        ROUTER_PYTHON,
        ("sglang_router.launch_router",),
        "it names a python with sglang-router installed (.ci/run builds one in .venv-router)",
        ENV,
    )


def get_json(url: str) -> object:
    """The JSON at `url`, None when it does not answer (a router still starting)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def healthy_workers(url: str) -> set[str]:
    """The worker URLs the router at `url` lists as healthy right now."""
    listing = get_json(f"{url}/workers")
    if not isinstance(listing, dict):
        return set()
    return {w["url"] for w in listing.get("workers", []) if w.get("is_healthy") is True}


@asynccontextmanager
async def start_router(
    worker_urls: Sequence[str], log: Path, *, policy: str = "round_robin"
) -> AsyncIterator[str]:
    """The router on a free loopback port over `worker_urls`, once it lists them all healthy;
    yields its URL and stops it (by its pid) afterwards. Its own Prometheus port is a free
    one too: the default (29000) would collide with any other router on the machine.

    Async, so that simulators served by this event loop answer the router's probes while
    it starts. `round_robin` spreads requests evenly (the default `cache_aware` sends
    prompts with a common prefix to one worker until the load differs by 64 requests).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                *(ROUTER_PYTHON, "-m", "sglang_router.launch_router"),
                *("--host", "127.0.0.1", "--port", str(port), "--policy", policy),
                *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())),
                *("--shutdown-grace-period-secs", "1", "--log-level", "warn"),
                *("--worker-urls", *worker_urls),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=ENV,
            start_new_session=True,
        )
    try:

        def ready() -> bool:
            assert process.poll() is None, f"the router exited: {log.read_text()[-2000:]}"
            return healthy_workers(url) >= set(worker_urls)

        await wait_until(
            ready,
            START_S,
            f"the router at {url} lists {list(worker_urls)} healthy",
            interval=0.1,
            detail=lambda: log.read_text(errors="replace")[-2000:],
        )
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def router_recipe(startup_s: float = 60.0) -> ServerRecipe:
    """The `[router]` recipe of the servers tests: the real sglang-router on a free port,
    round robin over the workers its supervisor fills in (`{workers}`)."""
    port = free_port()
    return ServerRecipe(
        "router",
        (
            *(ROUTER_PYTHON, "-m", "sglang_router.launch_router"),
            *("--host", "127.0.0.1", "--port", str(port), "--policy", "round_robin"),
            *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())),
            *("--log-level", "warn", "--worker-urls", "{workers}"),
        ),
        port,
        startup_s=startup_s,
    )
