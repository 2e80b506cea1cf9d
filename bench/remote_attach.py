"""Remote attach: connect to correct totals over SSH, vs downloading the files and parsing them.

gen-tui's path is the app's own: `SSHHost.connect()` then `SSHHost.watch(...)`, which sends
the stdlib watcher over one channel and streams per-dataset counts, until every dataset's
totals equal a recount made beforehand. The baseline is what a script without gen-tui would
do: an asyncssh SFTP `get` of each `raw_responses.jsonl`, then `json.loads` per line. Both
talk to a real OpenSSH sshd on loopback (tests/support/sshd.py), and both read files that sit in the
page cache (they are read once before timing), so neither pays for the disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import CACHE, Table, publish, verdict
from bench.resume_scan import make_file
from gen_tui.backends.hosts import DatasetTotals, SSHHost
from gen_tui.backends.hosts.connection import connect
from gen_tui.backends.store.records import RAW_FILE, scan_records

TARGET_S = 3.0
Expected = dict[str, tuple[int, int]]


def datasets(count: int, megabytes: int) -> tuple[Path, Expected]:
    """`count` dataset folders of a ~`megabytes` MB record file each, and their recounts."""
    root = CACHE / f"attach-{count}x{megabytes}MB"
    expected: Expected = {}
    for index in range(count):
        name = f"B{index + 1}"
        target = root / name / RAW_FILE
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            source = make_file(megabytes, seed=index + 1)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        scan = scan_records(target)  # also brings the file into the page cache
        expected[name] = (scan.tokens, scan.records)
    return root, expected


async def attach(server, root: Path, expected: Expected) -> float:
    """Seconds from connecting until the watch shows every dataset's recount."""
    started = time.perf_counter()
    host = SSHHost("bench", server.alias, str(root), options=server.options())
    try:
        await host.connect()
        async with host.watch(str(root), list(expected)) as watch:
            async for item in watch:
                if not isinstance(item, DatasetTotals):
                    continue
                shown = {n: (t.tokens, t.samples) for n, t in watch.totals.items()}
                if shown == expected:
                    return time.perf_counter() - started
        raise RuntimeError(f"the watch ended before the totals were right: {watch.status}")
    finally:
        await host.close()


async def download(server, root: Path, expected: Expected) -> tuple[float, float]:
    """(download s, parse s) of SFTP get + json.loads per line; checks the totals too."""
    with tempfile.TemporaryDirectory(dir=CACHE) as into:
        started = time.perf_counter()
        conn = await connect(server.alias, server.options())
        async with conn, conn.start_sftp_client() as sftp:
            for name in expected:
                await sftp.get(str(root / name / RAW_FILE), os.path.join(into, name))
        fetched = time.perf_counter()
        counted: Expected = {}
        for name in expected:
            tokens = samples = 0
            with open(os.path.join(into, name), "rb") as handle:
                for line in handle:
                    tokens += json.loads(line)["completion_tokens"]
                    samples += 1
            counted[name] = (tokens, samples)
        parsed = time.perf_counter()
    if counted != expected:
        raise RuntimeError("the downloaded files disagree with the recount")
    return fetched - started, parsed - fetched


def run(smoke: bool, write: bool) -> bool:
    from tests.support.sshd import SSHD, start_sshd  # the tests' loopback sshd, keys and config

    count, megabytes, repeats = (8, 1, 1) if smoke else (8, 70, 3)
    if not Path(SSHD).exists():
        print("remote_attach: skipped, no OpenSSH server (apt-get install -y openssh-server)\n")
        return True
    root, expected = datasets(count, megabytes)
    size = sum((root / name / RAW_FILE).stat().st_size for name in expected) / 1e6
    records = sum(samples for _, samples in expected.values())
    with tempfile.TemporaryDirectory(prefix="sshd-", dir=CACHE) as folder:
        server = start_sshd(Path(folder))
        try:
            asyncio.run(attach(server, root, expected))  # warm-up: keys, imports, caches
            ours = [asyncio.run(attach(server, root, expected)) for _ in range(repeats)]
            fetch_s, parse_s = asyncio.run(download(server, root, expected))
        finally:
            server.stop()
    attach_s = statistics.median(ours)
    theirs = fetch_s + parse_s
    ratio = theirs / attach_s
    met = attach_s <= TARGET_S
    table = Table(
        "remote_attach",
        f"Remote attach ({count} datasets x {megabytes} MB over loopback OpenSSH, "
        f"target: <= {TARGET_S:g} s)",
        f"python -m bench remote_attach{' --smoke' if smoke else ''}",
        ["client", "connect to correct totals", "MB/s", "speed vs baseline", "target"],
    )
    table.add(
        "baseline: SFTP get + json.loads per line",
        f"{theirs:.2f} s (get {fetch_s:.2f} s, parse {parse_s:.2f} s)",
        f"{size / theirs:.0f}",
        "1.00x",
        "(baseline)",
    )
    spread = f", runs {min(ours):.2f}-{max(ours):.2f} s" if repeats > 1 else ""
    table.add(
        "gen-tui: SSHHost.connect + watch",
        f"{attach_s:.2f} s (median of {repeats}{spread})",
        f"{size / attach_s:.0f}",
        f"{ratio:.1f}x",
        f"<= {TARGET_S:g} s: {verdict(met)}",
    )
    table.notes.append(
        f"{size:.0f} MB in {records:,} records (B2-like lengths, output ids and text, the "
        "engine's layout). Both start from a new connection, include the SSH handshake, and "
        "read files in the page cache; totals are checked against a recount made beforehand. "
        "The watcher runs under the remote's `python3` and sends counts only."
    )
    publish(table, write)
    return met
