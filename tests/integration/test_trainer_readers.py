"""The trainers themselves read `gen-tui export`'s files: SpecForge 0.2.0's prompt ingestion
(`prepare_prompt_tasks`) on each format and vLLM speculators 0.9.0's `prepare-data` on the
`specforge` one, over the export of a real `gen-tui run` against the simulator.

Both need torch, which gen-tui does not, so they run from their own environment
(tests/support/trainer_probe.py under GEN_TUI_TRAINERS_PYTHON; `.ci/run` builds it in
`.venv-trainers`). Without it the tests are skipped, saying why.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.common import simulator
from gen_tui.backends.store.records import RAW_FILE, seal
from gen_tui.backends.tokenizer import load_tokenizer
from tests.support.run_output import ENV, gen_tui
from tests.support.side_python import side_python_problem
from tests.support.turns import TURN_MEAN, run_args, write_conversations

TRAINERS_PYTHON = os.environ.get("GEN_TUI_TRAINERS_PYTHON", "")
PROBE = Path(__file__).parents[1] / "support" / "trainer_probe.py"
MAX_LENGTH = 4096
"""Above every exported row (prompt up to ~80 tokens, answer at most 300): nothing is cut."""
DEMO_TEMPLATE = {
    "user_header": "<|user|>\n",
    "assistant_header": "<|assistant|>\n",
    "end_of_turn_token": "<|end|>\n",
}
"""backends/demo.py's CHAT_TEMPLATE in SpecForge's terms, which it needs to find the answer."""
FORMATS = ("specforge", "sharegpt", "text")
TURN_CONVERSATIONS = 20
# torch and datasets imports, SpecForge's map over 100 rows and a prepare-data process take
# tens of seconds on the two shared cores.
pytestmark = pytest.mark.timeout(300)


@functools.cache
def trainers_problem() -> str | None:
    """Why GEN_TUI_TRAINERS_PYTHON cannot run the trainers' readers (None: it can)."""
    return side_python_problem(
        "GEN_TUI_TRAINERS_PYTHON",
        TRAINERS_PYTHON,
        ("specforge", "speculators", "datasets", "transformers", "torch"),
        "it names a python with specforge 0.2.0 and speculators 0.9.0 "
        "(.ci/run builds one in .venv-trainers)",
        ENV,
    )


Row = tuple[tuple[int, ...], tuple[int, ...]]


def read_exports(
    run_dir: Path, tokenizer_dir: Path, folder: Path
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """Export `run_dir` in every format into `folder`, run the trainers' readers on it:
    (the export's rows per format, what each reader kept per `READER/FORMAT`)."""
    exported = {}
    for name in FORMATS:
        target = folder / f"{name}.jsonl"
        done = gen_tui("export", "--output-dir", str(run_dir), "--format", name,
                       "--to", str(target))  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        exported[name] = [json.loads(line) for line in target.read_text().splitlines()]
    report = folder / "kept.json"
    probe = subprocess.run(
        [TRAINERS_PYTHON, str(PROBE), str(folder), str(tokenizer_dir), json.dumps(DEMO_TEMPLATE),
         str(MAX_LENGTH), str(report)],
        capture_output=True, text=True, timeout=280, env=ENV, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    kept = {
        reader: [(tuple(ids), tuple(mask)) for ids, mask in rows]
        for reader, rows in json.loads(report.read_text()).items()
    }
    return exported, kept


@pytest.fixture(scope="module")
def read_back(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """(the export's rows per format, what each reader kept per `READER/FORMAT`)."""
    if problem := trainers_problem():
        pytest.skip(problem)
    # Asked for only now: a skipped test should not first spend seconds on a run.
    finished_run = request.getfixturevalue("finished_run")
    tokenizer_dir = request.getfixturevalue("tokenizer_dir")
    return read_exports(finished_run[0], tokenizer_dir, tmp_path_factory.mktemp("exports"))


@pytest.fixture(scope="module")
def read_back_turns(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """`read_back` of a `--turns all` run: 3-to-8-turn conversations against the simulator."""
    if problem := trainers_problem():
        pytest.skip(problem)
    tokenizer_dir = request.getfixturevalue("tokenizer_dir")
    vocab_size = request.getfixturevalue("vocab_size")
    work = tmp_path_factory.mktemp("turns")
    write_conversations(work / "prompts" / "chat.jsonl", TURN_CONVERSATIONS)
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        done = gen_tui(*run_args(work / "prompts", work / "out", url, tokenizer_dir, 10**9))
    assert done.returncode == 0, done.stderr.decode()
    folder = work / "exports"
    folder.mkdir()
    return read_exports(work / "out", tokenizer_dir, folder)


@pytest.fixture(scope="module")
def read_back_last(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """`read_back` of a `--turns last` run (the default) over the same conversations: each
    row's history holds the source dataset's assistant turns, the last turn regenerated."""
    if problem := trainers_problem():
        pytest.skip(problem)
    tokenizer_dir = request.getfixturevalue("tokenizer_dir")
    vocab_size = request.getfixturevalue("vocab_size")
    work = tmp_path_factory.mktemp("last")
    write_conversations(work / "prompts" / "chat.jsonl", TURN_CONVERSATIONS)
    args = run_args(work / "prompts", work / "out", "", tokenizer_dir, 10**9)
    args[args.index("--turns") + 1] = "last"
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        args[args.index("--server-url") + 1] = url
        done = gen_tui(*args)
    assert done.returncode == 0, done.stderr.decode()
    as_a_model_answers(work / "out" / "chat" / RAW_FILE, tokenizer_dir)
    folder = work / "exports"
    folder.mkdir()
    return read_exports(work / "out", tokenizer_dir, folder)


def as_a_model_answers(raw: Path, tokenizer_dir: Path) -> None:
    """Give each record the ids a model's answer has: the simulator's `text` is words its
    `output_ids` (random ids) are not, so SpecForge, rendering the text, would never meet
    the ids. Now they are the text's own tokens, and every other record ends with the stop
    token SGLang leaves in `output_ids` (`<|end|>`, the template's end of turn), which
    the row must not hold twice."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    stop = tokenizer.convert_tokens_to_ids("<|end|>")
    lines = []
    for index, line in enumerate(raw.read_bytes().splitlines()):
        record = json.loads(line)
        record.pop("crc32", None)
        ids = tokenizer(record["text"], add_special_tokens=False)["input_ids"]
        record["output_ids"] = ids + [stop] * (index % 2)
        record["completion_tokens"] = len(record["output_ids"])
        lines.append(seal(json.dumps(record, separators=(",", ":")).encode()) + b"\n")
    raw.write_bytes(b"".join(lines))


def pair(row: dict[str, Any]) -> Row:
    return tuple(row["input_ids"]), tuple(row["loss_mask"])


def masked(rows: list[Row]) -> int:
    return sum(sum(mask) for _, mask in rows)


def assert_same_rows(name: str, theirs: list[Row], ours: list[Row]) -> None:
    """SpecForge's render of each conversation is one of our rows, token for token: the
    first disagreement named (where the ids part, the masked tokens in all) before the
    whole is compared."""
    totals = f"masked tokens ours {masked(ours):,}, SpecForge's {masked(theirs):,}"
    by_ids = dict(ours)
    for ids, mask in theirs:
        if ids not in by_ids:
            longest = max(
                (o for o in by_ids if ids[: len(o)] == o or o[: len(ids)] == ids),
                key=len,
                default=None,
            )
            where = "" if longest is None else f" ({len(ids) - len(longest):+} ids at the end)"
            pytest.fail(f"{name}: SpecForge's ids are no exported row's{where}; {totals}")
        diff = [at for at, (a, b) in enumerate(zip(by_ids[ids], mask, strict=True)) if a != b]
        assert not diff, f"{name}: masks differ at {diff[:5]} of {len(ids)}; {totals}"
    assert Counter(theirs) == Counter(ours), f"{name}: {totals}"


def runs_of(mask: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of 1 in `mask`."""
    out: list[tuple[int, int]] = []
    for at, bit in enumerate(mask):
        if bit and (at == 0 or not mask[at - 1]):
            out.append((at, at))
        if bit:
            out[-1] = (out[-1][0], at + 1)
    return out


def test_both_trainers_keep_every_specforge_row_with_its_ids_and_mask(
    read_back: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    exported, kept = read_back
    rows = [pair(row) for row in exported["specforge"]]
    assert len(rows) == 100
    assert kept["specforge/specforge"] == rows  # the fast path keeps the file's order
    assert Counter(kept["speculators/specforge"]) == Counter(rows)  # prepare-data shuffles


def test_specforge_renders_sharegpt_and_text_rows_to_the_exported_prompt_and_answer(
    read_back: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
    tokenizer_dir: Path,
) -> None:
    """SpecForge tokenizes the conversation itself and masks the assistant turn by the
    template's markers: it must get the exported text's tokens, its loss starting exactly
    where the `specforge` row's prompt ends (the answer and its end-of-turn marker)."""
    exported, kept = read_back
    tokenizer = load_tokenizer(str(tokenizer_dir))
    prompt_length = {row["id"]: row["loss_mask"].index(1) for row in exported["specforge"]}
    expected = Counter[Row]()
    for row in exported["text"]:
        ids = tokenizer(row["text"], add_special_tokens=False)["input_ids"]
        split = prompt_length[row["id"]]
        expected[(tuple(ids), (0,) * split + (1,) * (len(ids) - split))] += 1
    assert sum(expected.values()) == 100
    assert [row["id"] for row in exported["sharegpt"]] == [row["id"] for row in exported["text"]]
    for name in ("sharegpt", "text"):  # build_eagle3_dataset shuffles
        assert Counter(kept[f"specforge/{name}"]) == expected, name
    # The loss ends as SpecForge's does: on the template's end-of-turn markup (`<|end|>\\n`),
    # in the ids and the mask (the row once ended with the answer's ids; the simulator's
    # ids are not its text's, so the answers' ids are compared in the `--turns last` test).
    end = tuple(tokenizer("<|end|>\n", add_special_tokens=False)["input_ids"])
    for ids, mask in [*expected, *map(pair, exported["specforge"])]:
        assert (ids[-len(end) :], mask[-len(end) :]) == (end, (1,) * len(end))


def test_both_trainers_keep_every_turns_all_row_with_every_turn_in_the_mask(
    read_back_turns: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    """`--turns all`: one row a conversation, as many runs of mask 1 as assistant turns,
    and both readers keep each row's ids and mask as exported."""
    exported, kept = read_back_turns
    rows = [pair(row) for row in exported["specforge"]]
    assert len(rows) == TURN_CONVERSATIONS
    for row in exported["specforge"]:
        mask = row["loss_mask"]
        runs = sum(1 for i, bit in enumerate(mask) if bit and (i == 0 or not mask[i - 1]))
        assert runs == row["metadata"]["turns"] >= 3
    assert kept["specforge/specforge"] == rows
    assert Counter(kept["speculators/specforge"]) == Counter(rows)


def test_specforge_masks_a_turns_all_conversation_it_renders_exactly_as_exported(
    read_back_turns: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    """SpecForge renders a `sharegpt`/`text` conversation itself and masks each assistant
    turn by the template's markers, from after the assistant header through the template's
    end-of-turn token (`<|end|>\\n` here, Qwen's `<|im_end|>\\n`): it must get the
    `specforge` row's ids and mask token for token, turn boundaries included (the row once
    left each turn's end-of-turn markup out: 2 tokens a turn fewer than SpecForge's mask,
    and the last turn's markup out of the ids)."""
    exported, kept = read_back_turns
    rows = [pair(row) for row in exported["specforge"]]
    for name in ("sharegpt", "text"):
        theirs = kept[f"specforge/{name}"]
        assert len(theirs) == TURN_CONVERSATIONS, name
        assert_same_rows(name, theirs, rows)


def test_specforge_masks_a_turns_last_row_regenerated_turn_as_exported(
    read_back_last: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
    tokenizer_dir: Path,
) -> None:
    """`--turns last` (the default) over 3-to-8-turn conversations: the row trains the
    regenerated last answer and the template's end-of-turn markup after it (`<|end|>\\n`),
    which SpecForge's own render masks: with `train_only_last_turn` it gets our row token
    for token, the turn boundary included. By default it masks the history's assistant
    turns too, the source dataset's answers, which our row leaves at 0 (another model's
    distribution: docs/export.md): the same ids, and its mask is ours plus exactly those
    turns, each an old answer with its markup."""
    exported, kept = read_back_last
    rows = [pair(row) for row in exported["specforge"]]
    assert len(rows) == TURN_CONVERSATIONS
    assert all(len(runs_of(mask)) == 1 and mask[-1] == 1 for _, mask in rows)
    tokenizer = load_tokenizer(str(tokenizer_dir))
    by_ids = dict(rows)
    for name in ("sharegpt", "text"):
        assert_same_rows(name, kept[f"specforge-last/{name}"], rows)
        everything = kept[f"specforge/{name}"]
        assert sorted(ids for ids, _ in everything) == sorted(by_ids), name
        for ids, mask in everything:
            ours = by_ids[ids]
            assert all(bit >= mine for bit, mine in zip(mask, ours, strict=True)), name
            history = [a if not b else 0 for a, b in zip(mask, ours, strict=True)]
            texts = [tokenizer.decode(ids[start:end]) for start, end in runs_of(history)]
            assert texts == [f"an old answer {turn}<|end|>\n" for turn in range(1, len(texts) + 1)]
            assert len(texts) >= 2, name  # 3 to 8 user turns: 2 to 7 in the history
