"""What a new user sees for a mistake on the command line: one line naming it, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.app.cli.main import main
from gen_tui.backends.tokenizer import TokenizerError, load_tokenizer


def _code(argv: list[str]) -> int | str | None:
    """main's exit code, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "B1.jsonl").write_text('{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n')
    return folder


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--concurrency", "0"], "--concurrency must be at least 1 or auto, got 0"),
        (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
        (["--datasets", "NOPE"], "NOPE"),
        (["--deadline", "7.30"], "--deadline '7.30': expected a time of day (07:30) or a dur"),
        (["--deadline", "24:00"], "--deadline '24:00': no such time of day (00:00 to 23:59)"),
        (["--max-cost", "-1"], "--max-cost must be at least 0, got -1"),
        (["--lane", "box"], "--lane 'box': expected NAME=URL[,api=sglang|openai|openai-batch]"),
        (["--lane", "box=http://h:1,price=0.2"], "'price=0.2' is not api=sglang|openai|openai-b"),
        (["--lane", "box=http://h:1,turnaround=2h"], "turnaround= is for a batch lane"),
        (["--lane", "b=http://h:1,api=openai-batch,turnaround=07:30"], "turnaround=DURATION"),
        (
            ["--lane", "b=http://h:1,api=openai-batch", "--lane", "c=http://h:2,api=openai-batch"],
            "lanes b and c are both api=openai-batch: a run takes one batch lane",
        ),
        (["--lane", "b=http://h:1,api=openai-batch"], "the only lane and a batch one"),
        (["--lane", "a=http://h:1", "--lane", "a=http://h:2"], "lane a given twice"),
        (
            ["--lane", "a=http://h:1", "--server-url", "http://h:2"],
            "--server-url http://h:2 and --lane both given",
        ),
        (
            ["--turns", "all", "--api", "openai-batch", "--server-url", "http://h:1/v1"],
            "--turns all cannot go through --api openai-batch",
        ),
    ],
)
def test_a_bad_value_is_named_before_the_missing_tokenizer_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    args = ["run", "--prompts-dir", str(_prompts(tmp_path)), "--output-dir", str(tmp_path / "o")]
    assert _code([*args, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "tokenizer" not in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("folder", ["empty", "nonexistent-prompts"])
def test_no_datasets_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    (tmp_path / "empty").mkdir()
    code = main(["run", "--prompts-dir", str(tmp_path / folder), "--output-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gen-tui: error: "), err


def test_a_negative_budget_is_called_negative(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--prompts-dir", str(_prompts(tmp_path)), "--max-tokens-per-dataset", "-5"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "'-5' is negative; it must be a positive count" in err and "not a number" not in err


def test_a_folder_without_a_tokenizer_says_so_in_full(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TokenizerError) as raised:
        load_tokenizer(str(tmp_path))
    message = str(raised.value)
    assert "holds no tokenizer" in message and "tokenizer.json" in message
    assert not message.rstrip().endswith(":")


def test_a_broken_tokenizer_file_gives_the_whole_reason_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError) as raised:
        load_tokenizer(str(tmp_path))
    message = str(raised.value)
    assert "\n" not in message and not message.rstrip().endswith(("one of:", ":")), message


def test_a_bad_deadline_in_the_config_names_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(f'[run]\ndeadline = "8 hours"\nprompts_dir = "{_prompts(tmp_path)}"\n')
    assert _code(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run.deadline '8 hours': expected a time of day" in err[0], err
