"""Saving a recipe's edited command into gen-tui.toml (backends/config/save.py): the argv
changes, every other byte of the file stays as the user wrote it (comments, order,
spacing), the result reads back through the config's own loader, and what cannot be saved
is one ConfigError line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.config.save import save_argv

CONFIG = """\
# my servers, tuned by hand
[[servers]]
name = "gpu0"   # the big one
argv = ["python", "-m", "sglang.launch_server", "--port", "30000"]
port = 30000
env = { CUDA_VISIBLE_DEVICES = "0" }

[[servers]]
name = "gpu1"
argv = ["python", "-m", "sglang.launch_server", "--port", "30001"]
port = 30001

[router]
argv = ["python", "-m", "sglang_router.launch_router", "--port", "31000",
        "--worker-urls", "{workers}"]
port = 31000
"""


def test_only_the_argv_changes(tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text(CONFIG)
    argv = ["python", "-m", "sglang.launch_server", "--port", "30001", "--mem-fraction-static",
            "0.8", "--note", "it's \"quoted\"\nand two lines"]  # fmt: skip
    said = save_argv(path, "gpu1", argv)
    assert said == f"saved gpu1's command in {path}"
    text = path.read_text()
    before, after = CONFIG.split(
        'argv = ["python", "-m", "sglang.launch_server", "--port", "30001"]'
    )
    assert text.startswith(before) and text.rstrip().endswith(after.rstrip())
    config = load_config(path)
    assert list(config.servers[1].argv) == argv
    assert config.servers[0].argv == ("python", "-m", "sglang.launch_server", "--port", "30000")


def test_the_router_and_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(CONFIG)
    link = tmp_path / "gen-tui.toml"
    link.symlink_to(real)
    argv = ["python", "-m", "sglang_router.launch_router", "--port", "31000", "--worker-urls",
            "{workers}", "--policy", "round_robin"]  # fmt: skip
    save_argv(link, "router", argv)
    assert link.is_symlink() and real.read_text().startswith("# my servers, tuned by hand\n")
    router = load_config(link).router
    assert router is not None and list(router.argv) == argv


def test_what_cannot_be_saved_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text(CONFIG)
    with pytest.raises(ConfigError, match="no recipe 'gpu9'"):
        save_argv(path, "gpu9", ["x"])
    with pytest.raises(ConfigError) as refused:  # an empty command is no recipe: not saved
        save_argv(path, "gpu0", [])
    assert "argv" in str(refused.value) and "\n" not in str(refused.value)
    assert path.read_text() == CONFIG
    assert [p.name for p in tmp_path.iterdir()] == ["gen-tui.toml"]  # no temporary left
