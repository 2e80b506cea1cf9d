"""The fixtures every kind of test shares: a real transformers tokenizer built offline, prompt
files, the simulator, a real sshd on loopback, a real one-node Slurm, and a host (this
machine or over that sshd).

Fixtures live here (or in a kind's own conftest.py), helpers in tests/support/: a test module
never imports from another test module (tests/unit/test_layout.py checks it), so moving or
splitting one never breaks another.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from gen_tui.backends.demo import build_tokenizer, write_prompts
from gen_tui.backends.hosts import LocalHost, RunIdentity, SSHHost
from gen_tui.backends.sim import SimConfig, SimServer
from tests.support import KINDS
from tests.support.real_sglang import (
    RealSGLang,
    model_cache,
    real_sglang_problem,
    start_real_sglang,
    tiny_model,
)
from tests.support.router import router_problem, start_router
from tests.support.runs import STANDIN, AnyHost, alive
from tests.support.slurm import Cluster, slurm_cluster
from tests.support.sshd import Sshd, python38, start_sshd

SHARED = {"real_sglang": "real-sglang", "slurm": "slurm"}
"""Fixtures standing for one thing on the machine, each its xdist group: the real SGLang
server (a minute to start, a core while it answers) starts once, on one worker, and Slurm's
one node takes one test's jobs at a time."""


def xdist_group(item: pytest.Item) -> str:
    """The worker group of `item` under `./dev.sh test`'s `--dist loadgroup`: a shared
    server's tests together (SHARED), then the tests that make or change Unix accounts (a
    csh test sets the shell of an account another module also logs in as), then one group
    per file, so a module's fixtures are made once and its tests keep their order."""
    names = getattr(item, "fixturenames", ())
    for fixture, group in SHARED.items():
        if fixture in names:
            return group
    if Path(item.path).name.startswith("test_real_sglang"):
        return SHARED["real_sglang"]  # its own real servers: one CPU SGLang story at a time
    if makes_accounts(Path(item.path)):
        return "accounts"
    return str(Path(item.path).relative_to(Path(__file__).parent))


@functools.cache
def makes_accounts(path: Path) -> bool:
    """Whether the test file makes or changes Unix accounts (tests/support/users.py)."""
    text = path.read_text(encoding="utf-8")
    return "tests.support.users" in text or "useradd" in text


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's kind, so `-m unit` selects what `tests/unit` holds;
    the unit tests are also `quick`, the tier `./dev.sh quick` runs (the others in it are
    marked one by one: one test with real processes per subsystem). Each test also gets its
    xdist group (xdist_group above)."""
    root = Path(__file__).parent
    for item in items:
        path = Path(item.path)
        if root in path.parents and path.relative_to(root).parts[0] in KINDS:
            kind = path.relative_to(root).parts[0]
            item.add_marker(kind)
            if kind == "unit":
                item.add_marker("quick")
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
    # The long groups first (a stable sort keeps every file's own order): with
    # --no-loadscopereorder xdist hands out groups in this order, and the real SGLang group
    # alone is some 8 minutes, which at the end would leave one worker running it alone.
    first = [*SHARED.values(), "accounts"]
    items.sort(key=lambda item: rank(item, first))


def rank(item: pytest.Item, first: list[str]) -> int:
    """Where `item`'s group comes in `first` (after all of them if not there)."""
    group = item.get_closest_marker("xdist_group")
    name = group.args[0] if group and group.args else ""
    return first.index(name) if name in first else len(first)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer(tmp_path_factory.mktemp("tokenizer") / "tok")


@pytest.fixture(scope="session")
def vocab_size(tokenizer_dir: Path) -> int:
    from gen_tui.backends.tokenizer import load_tokenizer

    return len(load_tokenizer(str(tokenizer_dir)))


@pytest.fixture
def prompts_dir(tmp_path: Path) -> Callable[..., Path]:
    """Write prompt files: prompts_dir(B1=100, B2=50) -> folder with B1.jsonl, B2.jsonl."""

    def make(**counts: int) -> Path:
        folder = tmp_path / "prompts"
        for name, count in counts.items():
            write_prompts(folder / f"{name}.jsonl", count)
        return folder

    return make


@pytest.fixture
async def sim(vocab_size: int) -> AsyncIterator[Callable[..., object]]:
    """Start simulators on loopback: `server = await sim(tokens_per_s=..., ...)`."""
    servers: list[SimServer] = []

    async def start(**overrides: object) -> SimServer:
        options: dict[str, object] = {"tokens_per_s": 1e7, "slots": 256, "vocab_size": vocab_size}
        options.update(overrides)
        server = SimServer(SimConfig(**options))  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def router(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start a real sglang-router in front of servers: `url = await router(a.url, b.url)`
    (round-robin unless `policy=` says otherwise). Skipped, saying why, where the router is
    not installed (tests/support/router.py)."""
    problem = router_problem()
    if problem:
        pytest.skip(problem)
    started = itertools.count()
    async with AsyncExitStack() as stack:

        async def start(*worker_urls: str, policy: str = "round_robin") -> str:
            log = tmp_path / f"router-{next(started)}.log"
            return await stack.enter_async_context(start_router(worker_urls, log, policy=policy))

        yield start


@pytest.fixture(scope="session")
def real_sglang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSGLang]:
    """One real SGLang 0.5.23 server on this CPU for the session, serving a tiny random-weight
    Llama (tests/support/real_sglang.py); stopped at the session's end. Skipped, saying why,
    where GEN_TUI_SGLANG_PYTHON cannot serve. Its cold start (about a minute) falls in the
    first test that asks for it: give that test a timeout of some minutes."""
    problem = real_sglang_problem()
    if problem:
        pytest.skip(problem)
    model = tiny_model(model_cache())
    log = tmp_path_factory.mktemp("real_sglang") / "server.log"
    with start_real_sglang(model, log) as server:
        yield server


@pytest.fixture(scope="session")
def finished_run(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, vocab_size: int
) -> tuple[Path, Path]:
    """(output dir, prompts dir) of one finished `gen-tui run` (see tests/support/run_output.py)."""
    from tests.support.run_output import make_run

    return make_run(tmp_path_factory.mktemp("finished_run"), tokenizer_dir, vocab_size)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One sshd for the session (tests that break connections only kill session children)."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def slurm() -> Cluster:
    """The real one-node Slurm that .ci/slurm-up starts (munged, slurmctld, slurmd on this
    machine); skipped, saying which part is missing, where it is not up."""
    cluster = slurm_cluster()
    if isinstance(cluster, str):
        pytest.skip(cluster)
    return cluster


@pytest.fixture(scope="module")
def users_sshd() -> Iterator[Sshd]:
    """A test sshd whose folder other users can read: sshd reads a user's authorized_keys
    as that user, and pytest's own temporary folders are root's alone."""
    folder = Path(tempfile.mkdtemp(prefix="gen-tui-sshd-", dir="/tmp"))
    folder.chmod(0o755)
    server = start_sshd(folder / "sshd")
    (folder / "sshd").chmod(0o755)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["local", "ssh"])
async def host(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyHost]:
    """Each test twice: on this machine, and over the session's sshd (Python 3.8 there when
    installed). Whatever the test started is stopped after it, failed or not."""
    out = tmp_path / "out"
    out.mkdir()
    made: AnyHost
    if request.param == "local":
        made = LocalHost(out)
    else:
        server: Sshd = request.getfixturevalue("sshd")
        made = SSHHost(
            "loopback",
            server.alias,
            str(out),
            options=server.options(),
            python=python38() or "python3",
        )
        await made.connect()
    started: list[RunIdentity] = []
    start = made.start

    async def tracked_start(*args: Any, **kwargs: Any) -> RunIdentity:
        identity = await start(*args, **kwargs)
        started.append(identity)
        return identity

    made.start = tracked_start  # type: ignore[method-assign]
    yield made
    for identity in started:  # a failed test leaves nothing running (identity-checked kill)
        if alive(identity.pid):
            await made.kill(identity, grace_s=2)
    await made.close()


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    """A user's own `run_inference.py` (tests/support/runs.py STANDIN), written to a file."""
    path = tmp_path / "scripts" / "run_inference.py"
    path.parent.mkdir()
    path.write_text(STANDIN)
    return path


@pytest.fixture
async def hook() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """(json:// URL, the alerts it received): a push target of the test's own, for apprise."""
    received: list[dict[str, Any]] = []

    async def take(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/hook", take)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"json://127.0.0.1:{port}/hook", received
    await runner.cleanup()
