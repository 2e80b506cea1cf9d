"""The router's worker list follows a Slurm job that came back on another node (issue 32):
its old URL leaves the list when it is healthy again at its new one, and a run naming the
recipe is sent to the node the job runs on now. The router here is an in-memory list
behind RouterWorkers' own add/remove/listing seams (tests/integration/test_server_router.py
drives the real sglang-router through them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gen_tui.app.cli.main import job_nodes
from gen_tui.backends.config.file import FileConfig
from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.router import RouterWorkers
from gen_tui.backends.servers.state import StateFile, local_folder

S = ServerState


class ListRouter(RouterWorkers):
    """A router whose worker list is a dict in memory (URL -> id)."""

    def __init__(self, workers: dict[str, str]) -> None:
        super().__init__(None, "http://router:31000", workers)  # type: ignore[arg-type]
        self.present: dict[str, str] = {}
        self.counter = 0

    async def listing(self) -> dict[str, str]:
        return dict(self.present)

    async def add(self, url: str) -> int:
        self.counter += 1
        self.present[url] = f"id{self.counter}"
        return 200

    async def remove(self, ident: str) -> int:
        self.present = {url: i for url, i in self.present.items() if i != ident}
        return 200


def event(state: ServerState, url: str) -> ServerEvent:
    return ServerEvent("gpu0", state, time.time(), url=url)


async def test_a_job_back_on_another_node_moves_on_the_router() -> None:
    router = ListRouter({"gpu0": "http://127.0.0.1:30000"})  # the recipe's URL, no address
    router.router_up = True
    router(event(S.HEALTHY, "http://node-a:30000"))
    said = [await router.apply("gpu0", S.HEALTHY)]
    assert set(router.present) == {"http://node-a:30000"}
    router(event(S.EXITED, "http://node-a:30000"))
    said.append(await router.apply("gpu0", S.EXITED))
    assert router.present == {}
    # Resubmitted, the job runs on node-b: the router lists it there, and only there.
    router(event(S.LOADING, "http://node-b:30000"))
    router(event(S.HEALTHY, "http://node-b:30000"))
    said.append(await router.apply("gpu0", S.HEALTHY))
    assert set(router.present) == {"http://node-b:30000"}, said
    await router.close()


async def test_the_old_node_leaves_even_when_its_removal_was_missed() -> None:
    router = ListRouter({"gpu0": "http://node-a:30000"})
    router.router_up = True
    router.present = {"http://node-a:30000": "old"}  # its exit never reached the router
    router(event(S.HEALTHY, "http://node-b:30000"))
    said = await router.reconcile()
    assert set(router.present) == {"http://node-b:30000"}, said
    assert any("removed http://node-a:30000 (moved)" in line for line in said), said
    assert router.moved == {}
    await router.close()


def test_a_run_naming_the_recipe_goes_to_the_jobs_node() -> None:
    recipe = ServerRecipe("gpu0", ("python",), 30000, launcher="slurm")
    fixed = ServerRecipe("gpu1", ("python",), 30001, launcher="slurm", address="proxy")
    file = FileConfig(path=Path("."), servers=[recipe, fixed])
    assert file.resolve_server("gpu0") == "http://127.0.0.1:30000"  # not running: not known
    file.nodes = {"gpu0": "node-b", "gpu1": "node-c"}
    assert file.resolve_server("gpu0") == "http://node-b:30000"
    assert file.resolve_server("gpu1") == "http://proxy:30001"  # its address wins


def test_gen_tui_run_reads_the_jobs_node_from_the_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    job = Launched("gpu0", "41", "local", 30000, time.time(), "gpu0.log", node="node-b")
    StateFile(local_folder()).note_launch("slurm", job)
    file = FileConfig(
        path=Path("."), servers=[ServerRecipe("gpu0", ("python",), 30000, launcher="slurm")]
    )
    assert job_nodes(file) == {"gpu0": "node-b"}
    file.nodes = job_nodes(file)
    assert file.resolve_server("gpu0") == "http://node-b:30000"
