"""The local watcher run from a folder others may write in: their module must not run as us.

The attack (attacker's pass 3): gen-tui started from a shared folder (/tmp-like, 1777) runs
its local watcher as `python -` there, and a program read from stdin has the working folder
first on sys.path: a `json.py` another user put in that folder was imported by every watch,
as root. The watcher now runs isolated (`python -I -`), so only the standard library loads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.watch import Watch
from tests.support.polling import wait_until
from tests.support.users import OTHER_USER, ensure_user, plant_module, shared_folder


async def _drain(watch: Watch) -> None:
    async for _ in watch:
        pass


async def test_a_watch_from_a_shared_folder_imports_nothing_planted_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-planted-module-ran-as-root"
    out = tmp_path / "out"
    (out / "B1").mkdir(parents=True)
    (out / "B1" / "raw_responses.jsonl").write_text('{"sample_id": 1, "completion_tokens": 7}\n')
    with shared_folder("gen-tui-watch-cwd-") as shared:
        plant_module(user, shared, marker)
        monkeypatch.chdir(shared)
        watch = LocalHost(out).watch(str(out), ["B1"])
        consumer = asyncio.create_task(_drain(watch))
        try:
            await wait_until(lambda: watch.totals.get("B1") is not None, 30, "B1's totals")
            assert (watch.totals["B1"].tokens, watch.totals["B1"].samples) == (7, 1)
        finally:
            await watch.aclose()
            consumer.cancel()
    assert not marker.exists(), "a module another user planted ran as root"
