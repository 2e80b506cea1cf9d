"""Fixtures of the TUI tests: an app factory over the real engine and simulator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.servers.state import local_folder
from tests.support.servers import kill_servers
from tests.support.tui import make_app


@pytest.fixture
def app_factory(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> Callable[..., GenTuiApp]:
    """`app_factory(datasets={"A": (prompts, budget)}, ...)`: see `make_app`."""

    def build(**kwargs: Any) -> GenTuiApp:
        return make_app(tmp_path, tokenizer_dir, prompts_dir, vocab_size, **kwargs)

    return build


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The servers' state folder (XDG_STATE_HOME of this test); every server killed after."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = local_folder()
    yield folder
    kill_servers(folder)
