"""Where a `gen-tui run --config FILE` writes, as the watcher tells it from the config
(issue 31, point 1): the config's `[run] output_dir` against the config's folder, `output`
of the run's cwd when it names none, unknown (with why) when the file cannot be read. The
scan used on a box whose python3 has no tomllib reads what tomllib reads, or gives up."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from gen_tui.backends.config.file import load_config
from gen_tui.backends.watcher.command_lines import (
    CONFIG_BYTES,
    config_output_dir,
    run_output_dir,
    scan_output_dir,
)

RUN = ["python", "-m", "gen_tui.app.cli", "run"]


def test_the_configs_output_dir_is_taken_against_the_configs_folder(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "gen-tui.toml"
    config.write_text('[run]\noutput_dir = "../data"\n')
    folder, why = config_output_dir([*RUN, "--config", "conf/gen-tui.toml"], str(tmp_path))
    assert (folder, why) == (str(tmp_path / "data"), None)
    # What the run itself makes of it (load_config: paths relative to the file).
    assert str(load_config(config).run["output_dir"]) == folder
    assert config_output_dir([*RUN, f"--config={config}"], None) == (folder, None)


def test_a_config_naming_no_folder_writes_output_of_the_runs_cwd(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("[sampling]\ntemperature = 0.5\n")
    argv = [*RUN, "--config", str(tmp_path / "c.toml")]
    assert config_output_dir(argv, "/work/x") == ("/work/x/output", None)
    assert config_output_dir(argv, None) == (None, "its working folder is unknown")


def test_a_config_that_cannot_be_read_leaves_the_folder_unknown(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[run\n")
    (tmp_path / "big.toml").write_bytes(b"#" * (CONFIG_BYTES + 1))
    (tmp_path / "nonutf8.toml").write_bytes(b'[run]\noutput_dir = "\xff"\n')
    (tmp_path / "int.toml").write_text("[run]\noutput_dir = 3\n")
    os.mkfifo(tmp_path / "fifo.toml")  # never blocks the watcher
    cwd = str(tmp_path)
    cases = {
        "bad.toml": "config bad.toml cannot be read as TOML",
        "big.toml": "config big.toml is not a regular file of at most 1 MB",
        "nonutf8.toml": "config nonutf8.toml cannot be read as TOML",
        "int.toml": "config int.toml cannot be read as TOML",
        "fifo.toml": "config fifo.toml is not a regular file of at most 1 MB",
        "absent.toml": "config absent.toml cannot be read (No such file or directory)",
    }
    for name, why in cases.items():
        assert config_output_dir([*RUN, "--config", name], cwd) == (None, why), name
    relative = "config bad.toml is relative to a working folder that cannot be read"
    assert config_output_dir([*RUN, "--config", "bad.toml"], None) == (None, relative)
    # Anyone's argv: the path said is bounded.
    long = "x" * 5000
    why = config_output_dir([*RUN, "--config", long], cwd)[1]
    assert why is not None and len(why) < 400


def test_only_a_gen_tui_run_naming_no_output_dir_is_read_for_one(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text('[run]\noutput_dir = "o"\n')
    config = str(tmp_path / "c.toml")
    assert config_output_dir([*RUN, "--config", config, "--output-dir", "x"], None) == (
        None,
        None,
    )
    assert config_output_dir(["python", "run_inference.py", "--config", config], None) == (
        None,
        None,
    )
    assert config_output_dir([*RUN, "--config", config], None) == (str(tmp_path / "o"), None)


@pytest.mark.parametrize(
    "text",
    [
        '[run]\noutput_dir = "out"\n',
        "[ run ] # the run\n'output_dir'   =   'o\\ut'  # literal\n",
        '[run]\noutput_dir = "a\\"b\\u00e9"\n[sampling]\noutput_dir_x = 1\n',
        '[sampling]\ntemperature = 1.0\n[[datasets]]\nname = "B2"\noutput_dir = "no"\n',
        '[datasets.x]\noutput_dir = "no"\n[run]\nconcurrency = 4\n',
        "# nothing\n",
    ],
)
def test_the_scan_without_tomllib_reads_what_tomllib_reads(text: str) -> None:
    assert scan_output_dir(text) == run_output_dir(text)
    assert run_output_dir(text) == tomllib.loads(text).get("run", {}).get("output_dir")


@pytest.mark.parametrize(
    "text",
    [
        '[run]\noutput_dir = """out"""\n',
        'run.output_dir = "out"\n',
        'run = { output_dir = "out" }\n',
        '[run]\noutput_dir = ["out"]\n',
        '[run]\noutput_dir = "a\\eb"\n',  # TOML 1.1's \e: not JSON's
    ],
)
def test_the_scan_gives_up_on_what_it_cannot_be_sure_of(text: str) -> None:
    with pytest.raises(ValueError):
        scan_output_dir(text)


def test_a_config_changed_since_is_read_again(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[run]\noutput_dir = "first"\n')
    argv = [*RUN, "--config", str(config)]
    assert config_output_dir(argv, None) == (str(tmp_path / "first"), None)
    config.write_text('[run]\noutput_dir = "second"\n')
    assert config_output_dir(argv, None) == (str(tmp_path / "second"), None)
    config.write_text("[run\n")
    assert config_output_dir(argv, None)[0] is None
