"""`gen-tui verify`: every record of a dataset checked completely.

The resume scan reads only the head of each line (its sample_id and token count), which is
what a budget needs and what keeps a resume fast. Verify is the full check that scan is
not: each line parses, each field has its type, the ids are integers the tokenizer knows,
their count is the server's count, no sample comes twice, every sample is in the prompt
file and every finish_reason is one a server sends. Run it before an export and after a
crash. It reads one line at a time; memory holds a line number per record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.figures import counted
from gen_tui.backends.store.manifest import (
    ManifestError,
    RunSetup,
    native_ids,
    read_manifest,
)
from gen_tui.backends.store.prompts import Prompt, iter_prompts
from gen_tui.backends.store.records import (
    RAW_FILE,
    RecordFileError,
    open_records,
    record_lines,
    record_turn,
    sample_key,
    seal_problem,
    sealed,
)
from gen_tui.backends.tokenizer import TokenizerError, load_tokenizer
from gen_tui.backends.untrusted import one_line
from gen_tui.backends.watcher import MAX_COMPLETION_TOKENS, SAMPLE_ID_MAX, SAMPLE_ID_MIN, quoted

KNOWN_FINISH_REASONS = frozenset(
    {"stop", "length", "content_filter", "tool_calls", "function_call"}
)
"""What SGLang (`stop`, `length`; an `abort` is never a record) and OpenAI-compatible servers
finish an answer with."""
FIRST_PROBLEMS = 10
"""Problems listed per dataset; the summary line counts them all."""


@dataclass
class Verdict:
    """One dataset's result: its counts, its first problems, what could not be checked."""

    name: str
    records: int = 0
    problems: int = 0
    first: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    def problem(self, where: str, reason: str) -> None:
        self.problems += 1
        if len(self.first) < FIRST_PROBLEMS:
            self.first.append(f"{where}: {one_line(reason)}")

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        state = "ok" if self.ok else counted(self.problems, "problem")
        extra = f" (not checked: {'; '.join(self.unchecked)})" if self.unchecked else ""
        return f"{self.name}: {counted(self.records, 'record')}, {state}{extra}"


def _count(record: dict[str, Any], name: str, top: int) -> str | None:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        return f"field '{name}' must be an integer from 0 to {top}, got {quoted(value)}"
    return None


def record_problem(
    record: Any, vocab: int | None, count_ids: bool, ids_expected: bool = True
) -> str | None:
    """The first thing wrong with a parsed record, or None. `vocab`: ids must be below it
    (None: not checked). `count_ids`: the ids are the server's, so there are
    `completion_tokens` of them (on the OpenAI path they are the local tokenizer's).
    `ids_expected`: False for the records of an `--api openai` run without a tokenizer,
    which rightly have no `output_ids` (nothing could make them); any they do hold are
    still checked."""
    if not isinstance(record, dict):
        return "record is not a JSON object"
    if "completion_tokens" not in record and ("usage" in record or "meta_info" in record):
        return "the seed script's layout (no top-level completion_tokens, no output_ids)"
    sample_id = record.get("sample_id")
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
        return f"field 'sample_id' must be a string or integer, got {quoted(sample_id)}"
    if isinstance(sample_id, int) and not SAMPLE_ID_MIN <= sample_id <= SAMPLE_ID_MAX:
        return "field 'sample_id' is out of the 64-bit range"
    for name in ("completion_tokens", "prompt_tokens"):
        if (problem := _count(record, name, MAX_COMPLETION_TOKENS)) is not None:
            return problem
    reason = record.get("finish_reason")
    if not isinstance(reason, str) or reason not in KNOWN_FINISH_REASONS:  # a list: unhashable
        return f"field 'finish_reason' is {quoted(reason)}, not one a server sends"
    ids = record.get("output_ids")
    if "output_ids" not in record and not ids_expected:
        ids = []
    elif not isinstance(ids, list):
        return "field 'output_ids' is missing or not a list"
    if not all(type(token) is int for token in ids):
        bad = next(token for token in ids if type(token) is not int)
        return f"field 'output_ids' holds {quoted(bad)}, not an integer id"
    if ids and (min(ids) < 0 or (vocab is not None and max(ids) >= vocab)):
        bad = min(ids) if min(ids) < 0 else max(ids)
        top = "" if vocab is None else vocab - 1
        return f"field 'output_ids' holds id {bad}, outside the tokenizer's range 0..{top}"
    if count_ids and len(ids) != record["completion_tokens"]:
        return (
            f"field 'output_ids' holds {len(ids)} ids but completion_tokens is "
            f"{record['completion_tokens']}"
        )
    for name in ("text", "reasoning"):
        if record.get(name) is not None and not isinstance(record[name], str):
            return f"field '{name}' must be a string"
    if ("turn" in record or "turns" in record) and record_turn(record) is None:
        return (
            f"fields 'turn' and 'turns' must be integers with 1 <= turn <= turns, got "
            f"{quoted(record.get('turn'))} and {quoted(record.get('turns'))}"
        )
    return None


class TurnOrder:
    """`--turns all`: each conversation's turns whole and in order in its record file.

    A turn must follow its conversation's previous turn (turn k after turn k-1), name the
    same turn count as the conversation's other turns, and come once: a gap or a duplicate
    would be a turn regenerated from a history other than the one on disk. A conversation
    whose last turns are not there yet is not a problem (a run stopped mid-way resumes it)
    but is counted, for the verdict to say."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int, int]] = {}
        """conversation key -> (last turn, turn count, line of its first turn)."""

    def check(self, key: str, turn: int, turns: int, line_no: int) -> str | None:
        """Note turn `turn` of `turns` of conversation `key` at `line_no`; the problem, if any."""
        last, count, first = self.seen.get(key, (0, turns, line_no))
        if turns != count:
            return f"conversation {key!r}: turn {turn} says {turns} turns, its turn 1 said {count}"
        if turn <= last:
            return f"conversation {key!r}: turn {turn} again (after turn {last}): a duplicate"
        if turn != last + 1:
            missing = f"turn {last + 1}" if turn == last + 2 else f"turns {last + 1}-{turn - 1}"
            return f"conversation {key!r}: turn {turn} follows turn {last}: {missing} missing"
        self.seen[key] = (turn, count, first)
        return None

    def unfinished(self) -> int:
        """Conversations whose last turns are not on disk yet."""
        return sum(1 for last, count, _ in self.seen.values() if last < count)


def _setup(
    folder: Path, verdict: Verdict, tokenizers: dict[str, Any]
) -> tuple[RunSetup | None, int | None]:
    """The dataset's setup and its tokenizer's size, noting what is missing."""
    try:
        setup = read_manifest(folder).single_setup()
    except ManifestError as exc:
        verdict.problem(str(folder), str(exc))
        verdict.unchecked.append("ids' range and sample_ids against the prompt file")
        return None, None
    if not setup.tokenizer:
        if setup.api == "sglang":  # an OpenAI run without one has no ids: said by the caller
            verdict.unchecked.append("ids' range (the run had no tokenizer)")
        return setup, None
    if setup.tokenizer not in tokenizers:
        try:
            tokenizers[setup.tokenizer] = len(load_tokenizer(setup.tokenizer))
        except TokenizerError as exc:
            tokenizers[setup.tokenizer] = None
            verdict.problem(str(folder), str(exc))
    vocab = tokenizers[setup.tokenizer]
    if vocab is None:
        verdict.unchecked.append("ids' range (tokenizer not loadable)")
    return setup, vocab


def verify_dataset(folder: Path, tokenizers: dict[str, Any]) -> Verdict:
    """Check every record of one dataset folder."""
    verdict = Verdict(folder.name)
    setup, vocab = _setup(folder, verdict, tokenizers)
    run_api = None if setup is None else setup.api
    # Ids come from the server (SGLang) or from the run's tokenizer (OpenAI path): an
    # OpenAI run without one has none to write, as its manifest's empty tokenizer says.
    ids_expected = setup is None or setup.api == "sglang" or bool(setup.tokenizer)
    if not ids_expected:
        verdict.unchecked.append("output ids (an --api openai run without --tokenizer has none)")
    raw = folder / RAW_FILE
    first_line: dict[str, int] = {}
    order = TurnOrder()
    unsealed = 0
    try:
        handle = open_records(raw) if os.path.lexists(raw) else None
    except (RecordFileError, OSError) as exc:
        verdict.problem(str(folder), str(exc))
        handle = None
    if handle is not None:
        with handle:
            for line_no, _, line in record_lines(handle):
                where = f"{raw}:{line_no}"
                if isinstance(line, int):
                    verdict.records += 1
                    verdict.problem(where, f"line is {line:,} bytes: no record is that long")
                    continue
                if not line.strip():
                    continue
                verdict.records += 1
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    torn = not line.endswith(b"\n")
                    verdict.problem(
                        where,
                        "torn last line (a crash cut it; the next run moves it aside)"
                        if torn
                        else f"not valid JSON ({exc})",
                    )
                    continue
                count_ids = native_ids(record, run_api)  # a fleet: by the record's lane's API
                problem = seal_problem(line) or record_problem(
                    record, vocab, count_ids, ids_expected
                )
                if problem is not None:
                    verdict.problem(where, problem)
                    continue
                if not sealed(line):
                    unsealed += 1
                key = sample_key(record["sample_id"])
                turn = record_turn(record)
                if turn is not None:
                    if (problem := order.check(key, *turn, line_no)) is not None:
                        verdict.problem(where, problem)
                    first_line.setdefault(key, line_no)
                    continue
                if key in first_line:
                    verdict.problem(
                        where, f"duplicate sample_id {key!r} (first at line {first_line[key]})"
                    )
                else:
                    first_line[key] = line_no
    if unsealed:
        verdict.unchecked.append(f"the bytes of {unsealed} records without a crc32 (older runs)")
    if unfinished := order.unfinished():
        verdict.unchecked.append(
            f"{counted(unfinished, 'conversation')} not finished yet (a run resumes them)"
        )
    if setup is not None:
        _check_prompts(Path(setup.prompts), raw, first_line, verdict)
    return verdict


def _check_prompts(prompts: Path, raw: Path, first_line: dict[str, int], verdict: Verdict) -> None:
    """Every record's sample_id must be a prompt of the run's prompt file."""
    missing = dict(first_line)
    try:
        for prompt in iter_prompts(prompts):
            if isinstance(prompt, Prompt):
                missing.pop(prompt.key, None)
    except FileNotFoundError:
        verdict.problem(quoted(str(prompts)), "the run's prompt file is gone")
        return
    except OSError as exc:  # a FIFO, another user's link, a name too long: said, not raised
        why = getattr(exc, "strerror", None) or str(exc)
        verdict.problem(quoted(str(prompts)), f"cannot read the run's prompt file ({why})")
        return
    for key, line_no in sorted(missing.items(), key=lambda pair: pair[1]):
        verdict.problem(f"{raw}:{line_no}", f"sample_id {key!r} is not in {prompts}")
