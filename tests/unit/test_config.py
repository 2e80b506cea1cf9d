import re
from pathlib import Path

import pytest

from gen_tui.app.cli.main import engine_config
from gen_tui.app.cli.parser import build_parser
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.config.run import EngineConfig, EngineError, resolve_api_key


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gen-tui.toml"
    path.write_text(text)
    return path


GOOD = """
[run]
server_urls = ["http://127.0.0.1:30000", "http://127.0.0.1:30001"]
tokenizer = "tok"
output_dir = "out"
concurrency = "150"
budget_mode = "strict"
max_tokens_per_dataset = "10M"

[sampling]
max_new_tokens = "8k"
temperature = 0.7
stop_token_ids = [2]

[[datasets]]
name = "B1_glaive"
prompts = "prompts/B1.jsonl"
max_samples = 7000

[[datasets]]
name = "B2_opencodeinstruct"
prompts = "prompts/B2.jsonl"
max_tokens = "2.5e6"
"""


def test_good_config_merges_with_flags(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    path = _config(tmp_path, GOOD)
    args = build_parser().parse_args(["run", "--config", str(path), "--temperature", "0.2"])
    config = engine_config(args)
    assert [d.name for d in config.datasets] == ["B1_glaive", "B2_opencodeinstruct"]
    assert config.datasets[0].max_tokens == 10_000_000
    assert config.datasets[0].max_samples == 7000
    assert config.datasets[1].max_tokens == 2_500_000
    assert config.datasets[1].prompts == tmp_path / "prompts" / "B2.jsonl"
    assert config.concurrency == 150
    assert config.budget_mode is BudgetMode.STRICT
    assert config.sampling == {"max_new_tokens": 8000, "temperature": 0.2, "stop_token_ids": [2]}
    assert config.output_dir == tmp_path / "out"
    assert config.tokenizer == str(tmp_path / "tok")
    assert len(config.server_urls) == 2


def test_flag_budget_overrides_every_dataset(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()  # `gen-tui run` checks its tokenizer folder up front
    path = _config(tmp_path, GOOD)
    args = build_parser().parse_args(
        [
            "run",
            "--config",
            str(path),
            "--token-budget",
            "500k",
            "--datasets",
            "B2_opencodeinstruct",
        ]
    )
    config = engine_config(args)
    assert [(d.name, d.max_tokens) for d in config.datasets] == [("B2_opencodeinstruct", 500_000)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[run]\nconcurency = 5\n", "unknown key run.concurency"),
        ('[run]\nmax_tokens_per_dataset = "lots"\n', None),
        ("[run\n", "not valid TOML"),
        ('[run]\nbudget_mode = "exact"\n', "run.budget_mode 'exact' is not one of"),
        ('[[datasets]]\nname = "../etc"\nprompts = "x"\n', "datasets[0]: dataset name"),
        ('[[datasets]]\nname = "a"\n', "datasets[0] has no 'prompts'"),
        ('[[datasets]]\nname = "a"\nprompts = "x"\nmax_tokens = "1.5x"\n', "max_tokens"),
        ("[sampling]\ntemperature = true\n", "sampling.temperature must not be true/false"),
        ("[extra]\n", "unknown table(s) extra"),
    ],
)
def test_bad_configs_name_file_and_key(tmp_path: Path, text: str, message: str | None) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(str(path))
    if message:
        assert message in str(info.value)


def test_hosts(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
[[hosts]]
name = "gpu-box"
target = "root@10.0.0.5:2222"
output_dir = "/data/out"
command = ["python3", "run_inference.py"]

[[hosts]]
name = "here"
target = "local"
output_dir = "out"
""",
    )
    hosts = load_config(path).hosts
    assert [(h.name, h.target, h.output_dir) for h in hosts] == [
        ("gpu-box", "root@10.0.0.5:2222", "/data/out"),
        ("here", None, "out"),
    ]
    assert hosts[0].command == ["python3", "run_inference.py"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[hosts]]\nname = "a"\n', "hosts[0] has no 'output_dir'"),
        ('[[hosts]]\nname = "a; rm"\noutput_dir = "x"\n', "hosts[0].name"),
        ('[[hosts]]\nname = "a"\noutput_dir = "x"\ncommand = []\n', "command must be"),
        ('[[hosts]]\nname = "a"\noutput_dir = "x"\nport = 22\n', "unknown key hosts[0].port"),
    ],
)
def test_bad_hosts(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(_config(tmp_path, text))


def _key_config(env: str | None) -> EngineConfig:
    return EngineConfig([], ["http://x"], "tok", Path("out"), api="openai", api_key_env=env)


@pytest.mark.parametrize("raw", ["sk-abc\r", " sk-abc\n", "\tsk-abc"])
def test_api_key_loses_surrounding_white_space(monkeypatch, raw: str) -> None:
    monkeypatch.setenv("MY_KEY", raw)
    assert resolve_api_key(_key_config("MY_KEY")) == ("sk-abc", "MY_KEY")


@pytest.mark.parametrize("raw", ["sk-a\rbc", "sk a", "sk-\x1b[2Jabc"])
def test_api_key_with_a_control_character_inside_is_refused_by_name(monkeypatch, raw) -> None:
    monkeypatch.setenv("MY_KEY", raw)
    with pytest.raises(EngineError, match=r"^MY_KEY holds a space or a control character") as err:
        resolve_api_key(_key_config("MY_KEY"))
    assert "sk" not in str(err.value)  # the key itself is never echoed


def test_counts_given_as_text_are_kept_as_their_numbers() -> None:
    """An EngineConfig built in code takes a count as text, as a config file does, and keeps
    the number: the runner compares `concurrency` with the servers' batch (mypy found it
    compared the text with an int) and the budget shares `max_total_tokens`."""
    config = EngineConfig(
        [], ["http://x"], "tok", Path("out"), concurrency="2k", max_total_tokens="10M"
    )
    assert config.concurrency == 2000 and config.max_concurrency == 2000
    assert config.max_total_tokens == 10_000_000
    assert EngineConfig([], concurrency="auto").concurrency == "auto"


# [panel] and [keys]: themes, vim movement and remapped keys (issue 31, requests 6 and 7)


def _panel_error(tmp_path: Path, text: str) -> str:
    from gen_tui.app.cli.launch import panel_options

    path = _config(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        panel_options(path, load_config(path).panel)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


def test_panel_and_keys_tables_are_read(tmp_path: Path) -> None:
    from gen_tui.app.cli.launch import panel_options

    path = _config(
        tmp_path,
        '[panel]\ntheme = "nord"\nvim = true\n[keys]\nruns = "w"\nfilter = ["f", "/"]\n',
    )
    panel = load_config(path).panel
    assert (panel.theme, panel.vim) == ("nord", True)
    assert panel.keys == (("runs", "w"), ("filter", "f,/"))
    options = panel_options(path, panel)
    assert options["theme"] == "nord"
    assert options["keymap"]["runs"] == "w", "[keys] goes over vim's g"
    assert options["keymap"]["filter"] == "f,slash"
    assert options["keymap"]["move.down"] == "down,j"
    assert options["keymap"]["kill"] == "x"


def test_panel_defaults_are_the_settings_own(tmp_path: Path) -> None:
    from gen_tui.backends.settings import DEFAULT_THEME

    panel = load_config(_config(tmp_path, "")).panel
    assert (panel.theme, panel.vim, panel.keys) == (DEFAULT_THEME, False, ())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[keys]\nkil = "x"\n', "keys.kil: no such binding"),
        ('[keys]\nkill = "q"\n', "keys.kill = 'q': q is already quit's key"),
        ('[keys]\nkill = "?"\n', "keys.kill = 'question_mark': question_mark is already help's"),
        ('[keys]\nkill = "tab"\n', "keys.kill = 'tab': tab is kept for moving the focus"),
        ('[panel]\nvim = true\n[keys]\nkill = "k"\n', "is already move.up's key"),
        ('[panel]\ntheme = "neon"\n', "panel.theme 'neon' is not a theme"),
    ],
)
def test_panel_problems_are_one_line_naming_file_and_key(
    tmp_path: Path, text: str, said: str
) -> None:
    message = _panel_error(tmp_path, text)
    assert said in message, message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[keys]\nkill = 1\n", "keys.kill must be a key"),
        ('[keys]\nkill = "ctrl k"\n', "keys.kill must be a key"),
        ('[keys]\nkill = ""\n', "keys.kill must be a key"),
        ("keys = 3\n", "[keys] must be a table"),
        ('[panel]\nvim = "yes"\n', "panel.vim has the wrong type"),
        ("[panel]\ncolour = 1\n", "unknown key panel.colour"),
    ],
)
def test_panel_and_keys_types_are_checked(tmp_path: Path, text: str, said: str) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(said)) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_deadline_and_cap_come_from_the_file_and_a_flag_wins(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    path = _config(tmp_path, GOOD.replace("[run]\n", '[run]\ndeadline = "07:30"\nmax_cost = 60\n'))
    config = engine_config(build_parser().parse_args(["run", "--config", str(path)]))
    assert (config.deadline, config.max_cost) == ("07:30", 60)
    args = ["run", "--config", str(path), "--deadline", "8h", "--max-cost", "12.5"]
    config = engine_config(build_parser().parse_args(args))
    assert (config.deadline, config.max_cost) == ("8h", 12.5)
    assert EngineConfig(datasets=[]).deadline is None  # no deadline unless one is given
