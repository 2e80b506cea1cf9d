"""The `metrics` and `gpus` lines: the servers' /metrics and nvidia-smi, read on the box.

Why on the box: no server port needs exposing to the client, and what crosses the network
is trimmed (no histograms, no help texts) to stay under the client's line limit.

A router (sglang-router 0.3.2) serves no /metrics on its URL (404): when a URL answers so,
the watcher asks its `/get_server_info` whether it is one (`router_manager`), and if so
reads the /metrics of each worker its `/workers` lists (the first MAX_ROUTER_WORKERS by
URL, side by side): one `metrics` line per worker (with `router`: whose it is), then the
router's own line with `workers`, the listing (`url`, `healthy`). The client sums them, as
a run of its own does (`backends/telemetry/workers.py`), so a router's load shows even for
a run that writes no progress.json.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import typing
import urllib.parse

from .emit import _emit
from .names import PROGRESS_MAX_BYTES

# Telemetry (watch mode, `--telemetry SECONDS`): the servers' /metrics read on the box
# itself (no port needs exposing) and the GPUs from nvidia-smi, forwarded as `metrics` and
# `gpus` lines. A /metrics answer is read up to METRICS_MAX_BYTES; what is forwarded drops
# the histograms and help texts (the bulk of SGLang's ~100 KB) and must fit in
# METRICS_SENT_BYTES, under the client's line limit.
TELEMETRY_S = 2.0
METRICS_MAX_BYTES = 4 << 20
METRICS_SENT_BYTES = 48 << 10
METRICS_TIMEOUT_S = 3.0
MAX_METRICS_URLS = 16
NVIDIA_SMI_QUERY = "index,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"
NVIDIA_SMI_TIMEOUT_S = 5.0
MAX_GPUS = 64
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count", "_created")
MAX_ROUTER_WORKERS = 32
"""The most workers of one router read (as a run reads: telemetry/workers.py)."""
ROUTER_INFO_BYTES = 1 << 20
ROUTER_LIST_BYTES = 4 << 20
_WORKER_URL = re.compile(r"https?://[!-~]{1,500}\Z")
"""A worker URL: http(s) with a host, printable ASCII only (nothing a terminal or a log
could act on)."""


# -- telemetry (servers and GPUs) ------------------------------------------------------


def _metric_line(line: str) -> bool:
    """Whether a /metrics line is forwarded: samples and their TYPE lines, but no help texts
    and no histogram or summary parts (buckets are most of the text and no panel shows them)."""
    if not line or line.startswith("# HELP"):
        return False
    if line.startswith("#"):
        return line.startswith("# TYPE")
    name = line.split("{", 1)[0].split(" ", 1)[0]
    return not name.endswith(_HISTOGRAM_PARTS)


class _TooSlow(Exception):
    """A GET that had no whole answer by its deadline."""


def _cut(connection: typing.Any, late: threading.Event) -> None:
    """At a GET's deadline: mark it late, and shut its socket so a blocked read returns."""
    late.set()
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def http_get(url: str, limit: int, timeout: float = METRICS_TIMEOUT_S) -> tuple[int, bytes]:
    """(status, body read up to `limit` + 1 bytes) of a GET of `url`, all of it within
    `timeout` seconds: connecting, the headers and the body. A socket timeout alone bounds
    each read, and a server dripping a header byte a second held the telemetry thread for
    hours; here a timer shuts the socket at the deadline. Raises _TooSlow then, OSError or
    ValueError (http.client's errors are either) when the server fails. No proxy (the
    servers are on this box or its network: a user's HTTP proxy must not see them) and no
    redirect (a server may not send root's GET elsewhere)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    late = threading.Event()
    timer = threading.Timer(timeout, _cut, (connection, late))
    timer.daemon = True
    timer.start()
    try:
        connection.connect()
        if late.is_set():
            raise _TooSlow()
        path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        connection.request("GET", path, headers={"Accept": "text/plain, application/json"})
        response = connection.getresponse()
        body = response.read(limit + 1)
        if late.is_set():
            raise _TooSlow()
        return response.status, body
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if late.is_set():
            raise _TooSlow() from None
        if isinstance(exc, http.client.HTTPException) and not isinstance(exc, OSError):
            raise ValueError(str(exc) or type(exc).__name__) from None
        raise
    finally:
        timer.cancel()
        connection.close()


def fetch_metrics(url: str, timeout: float = METRICS_TIMEOUT_S) -> dict[str, typing.Any]:
    """One `metrics` line for `url`: its /metrics text (`text`), or `absent` (404: SGLang
    without --enable-metrics), or `error`: one line saying why not."""
    message: dict[str, typing.Any] = {"type": "metrics", "url": url}
    if not url.startswith(("http://", "https://")):
        message["error"] = "not an http(s) URL"
        return message
    try:
        status, data = http_get(url.rstrip("/") + "/metrics", METRICS_MAX_BYTES, timeout)
    except _TooSlow:
        message["error"] = "no whole answer within %g s" % timeout
        return message
    except (OSError, ValueError) as exc:
        message["error"] = str(exc)[:200] or type(exc).__name__
        return message
    if status in (404, 405):
        message["absent"] = True
        return message
    if status != 200:
        message["error"] = "HTTP %d" % status
        return message
    if len(data) > METRICS_MAX_BYTES:
        message["error"] = "more than %d MB" % (METRICS_MAX_BYTES >> 20)
        return message
    text = data.decode("utf-8", "replace")
    kept = "\n".join(line for line in text.splitlines() if _metric_line(line)) + "\n"
    if len(kept) > METRICS_SENT_BYTES:
        message["error"] = "more than %d KB of metrics besides histograms" % (
            METRICS_SENT_BYTES >> 10
        )
        return message
    message["text"] = kept
    return message


def _get_json(url: str, limit: int, timeout: float = METRICS_TIMEOUT_S) -> typing.Any:
    """The JSON at `url` read up to `limit` bytes within `timeout`, or None (no answer, too
    slow, too big, not JSON)."""
    try:
        status, data = http_get(url, limit, timeout)
        if status != 200 or len(data) > limit:
            return None
        return json.loads(data.decode("utf-8"))
    except (_TooSlow, OSError, ValueError, RecursionError):
        return None


def worker_url(value: object) -> str | None:
    """`value` as a worker URL without its trailing slash, if it is a plain http(s) URL
    (what a router lists is untrusted: gen-tui's client takes workers by this rule too)."""
    if not isinstance(value, str) or not _WORKER_URL.match(value):
        return None
    try:
        if not urllib.parse.urlsplit(value).netloc:
            return None
    except ValueError:  # "http://[::1:30000": not a URL urllib could open
        return None
    return value.rstrip("/")


def router_listing(listing: object) -> list[dict[str, typing.Any]]:
    """The workers in a router's /workers answer, `{"url", "healthy"}` each: plain http(s)
    URLs only, each once, in URL order (the router's own order changes), at most
    MAX_ROUTER_WORKERS."""
    entries = listing.get("workers") if isinstance(listing, dict) else None
    found: dict[str, bool] = {}
    for entry in entries if isinstance(entries, list) else []:
        url = worker_url(entry.get("url")) if isinstance(entry, dict) else None
        if url is not None:
            found.setdefault(url, entry.get("is_healthy") is not False)
    return [{"url": url, "healthy": found[url]} for url in sorted(found)[:MAX_ROUTER_WORKERS]]


def router_workers(url: str) -> list[dict[str, typing.Any]] | None:
    """The workers behind `url` if it is an SGLang router (its /get_server_info says
    `router_manager`), else None."""
    base = url.rstrip("/")
    info = _get_json(base + "/get_server_info", ROUTER_INFO_BYTES)
    if not isinstance(info, dict) or info.get("router_manager") is not True:
        return None
    return router_listing(_get_json(base + "/workers", ROUTER_LIST_BYTES))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]": the GPU does not say
    return value if value == value and abs(value) != float("inf") else None


def gpu_report(timeout: float = NVIDIA_SMI_TIMEOUT_S) -> dict[str, typing.Any]:
    """One `gpus` line: each GPU's index, name, utilisation %, memory used and total (MiB),
    power (W) and temperature (C) from nvidia-smi; `absent` without it; `error` if it fails."""
    message: dict[str, typing.Any] = {"type": "gpus"}
    exe = shutil.which("nvidia-smi")
    if exe is None:
        message["absent"] = True
        return message
    argv = [exe, "--query-gpu=" + NVIDIA_SMI_QUERY, "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        message["error"] = ("nvidia-smi: %s" % exc)[:200]
        return message
    out = done.stdout[:PROGRESS_MAX_BYTES].decode("utf-8", "replace")
    if done.returncode != 0:
        said = (done.stderr or done.stdout)[:200].decode("utf-8", "replace").strip()
        message["error"] = "nvidia-smi exited %d: %s" % (done.returncode, said)
        return message
    message["gpus"] = gpu_rows(out)
    return message


def gpu_rows(out: str) -> list[dict[str, typing.Any]]:
    """The GPUs in nvidia-smi's CSV answer `out`, one row each (lines of another shape left
    out). Each number is as printed, finite or null: its range is the client's to check
    (telemetry/gpus.py, bounds.py), where the figure is drawn; an index is kept only while
    it is a small whole number, so the line never carries a 300-digit one."""
    gpus = []
    for line in out.splitlines()[:MAX_GPUS]:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 7:
            continue
        index = _number(fields[0])
        if index is None or not 0 <= index < 1 << 31 or index != int(index):
            continue
        gpus.append(
            {
                "index": int(index),
                "name": fields[1][:80],
                "util": _number(fields[2]),
                "mem_used": _number(fields[3]),
                "mem_total": _number(fields[4]),
                "power": _number(fields[5]),
                "temp": _number(fields[6]),
            }
        )
    return gpus


class Telemetry(threading.Thread):
    """Reads the servers' /metrics and the GPUs every `every` s, beside the watch loop (a
    slow server must not hold up the totals or the heartbeat). A GPU report that says the
    same "absent" or error as the last one is not sent again."""

    def __init__(self, urls: list[str], every: float = TELEMETRY_S) -> None:
        super().__init__(name="gen-tui-telemetry", daemon=True)
        self.urls = urls[:MAX_METRICS_URLS]
        self.every = every
        self.listed: dict[str, list[dict[str, typing.Any]]] = {}
        """Each router's workers as last listed: read on while its listing does not answer."""

    def run(self) -> None:
        """Each round reads every server and the GPUs side by side, each read within its
        own deadline (http_get, nvidia-smi's timeout): one slow or dripping server costs
        the round its deadline, never the others' figures."""
        last_gpus = None
        servers = concurrent.futures.ThreadPoolExecutor(
            MAX_METRICS_URLS + 1, "gen-tui-server-metrics"
        )
        pool = concurrent.futures.ThreadPoolExecutor(MAX_ROUTER_WORKERS, "gen-tui-worker-metrics")
        try:
            while True:
                reads = [servers.submit(self.read_server, url, pool) for url in self.urls]
                gpus = servers.submit(gpu_report).result()
                if "gpus" in gpus or gpus != last_gpus:
                    _emit(gpus)
                last_gpus = gpus
                for read in reads:
                    read.result()
                time.sleep(self.every)
        except (OSError, ValueError):
            return  # stdout went away: the watch loop ends the process
        finally:
            servers.shutdown(wait=False)
            pool.shutdown(wait=False)

    def read_server(self, url: str, pool: concurrent.futures.Executor) -> None:
        """Emit `url`'s `metrics` line; for a router, its workers' lines before it."""
        message = fetch_metrics(url)
        workers = None
        if message.get("absent") or url in self.listed:
            workers = router_workers(url)
            if workers is None:
                workers = self.listed.get(url)
        if workers is not None:
            self.listed[url] = workers
            worker_urls = [worker["url"] for worker in workers]
            for read in pool.map(fetch_metrics, worker_urls):
                read["router"] = url
                _emit(read)
            message = {"type": "metrics", "url": url, "workers": workers}
        _emit(message)
