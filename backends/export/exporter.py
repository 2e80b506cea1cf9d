"""`gen-tui export`: a run's records as one trainer-format JSONL, with an exact accounting.

Each dataset is read in two passes so that memory stays flat whatever the size: first the
record file is indexed (each sample's byte offset, read off the line's head without
parsing its ids), then the prompt file is streamed in order and each prompt that has a
record is tokenized (in batches, with the run's own tokenizer and template, exactly as the
engine sent it) and written with its record, read back by offset. Rows come out in the
prompt file's order; memory holds the index (an offset per record) and one batch.

Every record is either exported or skipped with a reason, and the accounting says
`records = exported + skipped` per dataset and in all.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from gen_tui.backends.export import turns as turns_export
from gen_tui.backends.export.closing import closer
from gen_tui.backends.export.folders import left_out_line, ours_only
from gen_tui.backends.export.formats import WRITERS, Item, RunFacts, answer_text
from gen_tui.backends.figures import counted
from gen_tui.backends.store.manifest import (
    ManifestError,
    RunSetup,
    file_sha256,
    native_ids,
    read_manifest,
    template_sha256,
)
from gen_tui.backends.store.prompts import Prompt, iter_prompts
from gen_tui.backends.store.records import (
    RAW_FILE,
    RecordFileError,
    open_records,
    record_lines,
    record_turn,
    sample_key,
    turn_key,
)
from gen_tui.backends.tokenizer import TokenizerError, encode_many, load_tokenizer
from gen_tui.backends.untrusted import QUOTED_CHARS, one_line
from gen_tui.backends.watcher import DATASET_NAME, MANIFEST_FILE, record_counts, record_cut

BATCH = 64
"""Prompts tokenized per call: the batch call encodes them in one pass of the Rust tokenizer."""

TRUNCATED = "truncated"
OVER_LENGTH = "over --max-length"
PROMPT_MISSING = "prompt missing"
IDS_MISMATCH = "ids mismatch"
DUPLICATE = "duplicate"
NO_IDS = "no output_ids"
EMPTY = "empty answer"
UNTOKENIZABLE = "prompt untokenizable"


class ExportError(Exception):
    """Export refused: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class ExportOptions:
    format: str
    max_length: int | None = None
    drop_truncated: bool = False
    include: tuple[str, ...] = ()
    """Folders taken in although another user could have written them (`folders.py`)."""


@dataclass
class Tally:
    """One dataset's (or the whole export's) accounting: records = exported + skipped."""

    records: int = 0
    exported: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        self.records += other.records
        self.exported += other.exported
        self.skipped.update(other.skipped)

    def line(self, name: str) -> str:
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(self.skipped.items()))
        detail = f" ({reasons})" if reasons else ""
        return (
            f"{name}: {counted(self.records, 'record')} = {self.exported:,} exported + "
            f"{skipped:,} skipped{detail}"
        )


def _head_key(line: bytes) -> str | None:
    """The sample key of a line in our own layout, read off its head (no full parse)."""
    if not line.startswith(b'{"sample_id":'):
        return None
    rest = line[13:]
    if rest[:1] == b'"':
        end = rest.find(b'"', 1)
        raw = rest[1:end]
        if end < 0 or b"\\" in raw:
            return None
        return raw.decode("utf-8", "replace") if raw.isascii() else None
    end = rest.find(b",")
    digits = rest[:end]
    if end < 0 or not digits.isdigit() or digits[:1] == b"0" != digits:
        return None
    return digits.decode()


def _open(raw: Path) -> BinaryIO:
    try:
        return open_records(raw)
    except RecordFileError as exc:
        raise ExportError(str(exc)) from None


def index_records(
    raw: Path, tally: Tally, turns: dict[str, int] | None = None
) -> dict[str, tuple[int, int]]:
    """Each sample's (byte offset, line number) in `raw`, a `--turns all` turn's under its
    turn key (its conversation's key and turn count then in `turns`); a second record of a
    sample is counted as skipped. A line that is not a record stops the export: `gen-tui verify`
    names every such line, and a crash's torn last line is moved aside by the next run."""
    index: dict[str, tuple[int, int]] = {}
    turns = {} if turns is None else turns
    with _open(raw) as handle:
        for line_no, start, line in record_lines(handle):
            if isinstance(line, int):
                raise ExportError(
                    f"{raw}:{line_no}: line is {line:,} bytes: no record is that long"
                )
            if not line.strip():
                continue
            key = _head_key(line) if b'"turn":' not in line else None
            if key is None:
                try:
                    parsed = orjson.loads(line)
                    key = sample_key(record_counts(parsed)[0])
                    turn = record_turn(parsed)
                    if turn is not None:  # --turns all: a conversation's turn, by its key
                        turns[key] = max(turns.get(key, 0), turn[1])
                        key = turn_key(key, turn[0])
                except (orjson.JSONDecodeError, ValueError) as exc:
                    reason = one_line(str(exc), QUOTED_CHARS)
                    raise ExportError(
                        f"{raw}:{line_no}: {reason}; `gen-tui verify` lists every damaged "
                        "line (a torn last line is moved aside by the next run)"
                    ) from None
            tally.records += 1
            if key in index:
                tally.skipped[DUPLICATE] += 1
            else:
                index[key] = (start, line_no)
    return index


@dataclass
class _Dataset:
    """What one dataset's export works with."""

    name: str
    raw: Path
    setup: RunSetup
    tokenizer: Any
    options: ExportOptions
    tally: Tally
    write: Callable[[bytes], Any]

    @property
    def facts(self) -> RunFacts:
        return RunFacts(model=self.setup.model, sampling=self.setup.sampling)


def checked_setup(folder: Path, tokenizers: dict[str, Any]) -> tuple[RunSetup, Any]:
    """The dataset's one setup and its loaded tokenizer, or ExportError if the prompt file
    or the chat template changed since the run (rebuilt ids would not be the sent ones)."""
    try:
        setup = read_manifest(folder).single_setup()
    except ManifestError as exc:
        raise ExportError(str(exc)) from None
    prompts = Path(setup.prompts)
    if not prompts.is_file():
        raise ExportError(f"{folder.name}: the run's prompt file {prompts} is gone")
    if file_sha256(prompts) != setup.prompts_sha256:
        raise ExportError(
            f"{folder.name}: the prompt file {prompts} changed since the run (sha256 differs); "
            "export needs the file the run read"
        )
    if not setup.tokenizer:
        raise ExportError(f"{folder.name}: the run had no --tokenizer, so no prompt ids to rebuild")
    if setup.tokenizer not in tokenizers:
        try:
            tokenizers[setup.tokenizer] = load_tokenizer(setup.tokenizer)
        except TokenizerError as exc:
            raise ExportError(f"{folder.name}: {exc}") from None
    tokenizer = tokenizers[setup.tokenizer]
    if template_sha256(tokenizer) != setup.chat_template_sha256:
        raise ExportError(
            f"{folder.name}: the chat template of {setup.tokenizer} changed since the run "
            "(sha256 differs); rebuilt prompt ids would not be the ones sent"
        )
    return setup, tokenizer


def _skip_reason(
    record: dict[str, Any], prompt_ids: Any, options: ExportOptions, sent_ids: bool
) -> str | None:
    """Why a record is not exported, or None. `sent_ids`: the run sent token ids (SGLang's
    native API), so the rebuilt prompt must be exactly `prompt_tokens` long. An OpenAI-path
    run sent messages and the provider's template counted them: its count may differ by its
    own special tokens, so it cannot fail the rebuilt ids (the template hash still guards
    them)."""
    output_ids = record.get("output_ids")
    if not isinstance(output_ids, list):
        return NO_IDS
    if options.drop_truncated and record_cut(record):
        return TRUNCATED
    if isinstance(prompt_ids, Exception):
        return UNTOKENIZABLE
    if sent_ids and len(prompt_ids) != record.get("prompt_tokens"):
        return IDS_MISMATCH
    if not output_ids:
        return EMPTY
    return None


def _flush(
    ds: _Dataset,
    batch: list[tuple[Prompt, tuple[int, int]]],
    records: BinaryIO,
    writer: Callable[[Item, RunFacts, Any], bytes],
) -> None:
    encoded = encode_many(ds.tokenizer, [prompt.messages for prompt, _ in batch])
    facts = ds.facts
    closing = closer(ds.tokenizer)
    for (prompt, (offset, line_no)), prompt_ids in zip(batch, encoded, strict=True):
        records.seek(offset)
        try:
            record = orjson.loads(records.readline())
        except orjson.JSONDecodeError as exc:  # changed under us since the index
            raise ExportError(f"{ds.raw}:{line_no}: {exc}") from None
        sent_ids = native_ids(record, ds.setup.api)  # by the record's own lane's API
        reason = _skip_reason(record, prompt_ids, ds.options, sent_ids)
        row_ids = None
        if reason is None and ds.options.format == "specforge":
            try:  # the answer as the row trains it: the template's end-of-turn markup after
                text = functools.partial(answer_text, record, ds.tokenizer)
                row_ids = closing.closed(prompt.messages, text, record["output_ids"], prompt_ids)
            except Exception:  # a template can raise anything on odd input
                reason = UNTOKENIZABLE
        if reason is None and ds.options.max_length is not None:
            length = (
                len(prompt_ids) + len(record["output_ids"]) if row_ids is None else len(row_ids)
            )
            if length > ds.options.max_length:
                reason = OVER_LENGTH
        if reason is not None:
            ds.tally.skipped[reason] += 1
            continue
        item = Item(ds.name, record, prompt.messages, prompt_ids, row_ids)
        ds.write(writer(item, facts, ds.tokenizer) + b"\n")
        ds.tally.exported += 1


def _matching(
    path: Path, index: dict[str, tuple[int, int]], turns: dict[str, int]
) -> Iterator[tuple[Prompt, tuple[int, int]] | tuple[Prompt, list[tuple[int, int] | None]]]:
    """The prompts of `path` that have a record, with where; each is taken out of `index`.
    A `--turns all` conversation comes with where each of its turns is (None: not on disk)."""
    for prompt in iter_prompts(path):
        if not isinstance(prompt, Prompt):
            continue
        where = index.pop(prompt.key, None)
        if where is not None:
            yield prompt, where
            continue
        count = turns.get(prompt.key)
        if count is not None:
            yield prompt, [index.pop(turn_key(prompt.key, t), None) for t in range(1, count + 1)]


def _conversation(
    ds: _Dataset, prompt: Prompt, spots: list[tuple[int, int] | None], records: BinaryIO
) -> None:
    """Export one `--turns all` conversation as one row (backends/export/turns.py): only a
    whole one; the turns of one not finished are skipped, counted as such."""
    present = [spot for spot in spots if spot is not None]
    if len(present) < len(spots) or not spots:
        ds.tally.skipped[turns_export.UNFINISHED] += len(present)
        return
    read = []
    for offset, line_no in present:
        records.seek(offset)
        try:
            read.append(orjson.loads(records.readline()))
        except orjson.JSONDecodeError as exc:  # changed under us since the index
            raise ExportError(f"{ds.raw}:{line_no}: {exc}") from None
    item = turns_export.Conversation(ds.name, prompt, read)
    ids = ds.options.format == "specforge"
    built = turns_export.build(item, ds.tokenizer, ds.options.max_length, ids)
    if isinstance(built, str):
        ds.tally.skipped[built] += len(read)
        return
    ds.write(turns_export.row(ds.options.format, item, built, ds.facts, ds.tokenizer) + b"\n")
    ds.tally.exported += built.turns
    if built.turns < len(read):
        ds.tally.skipped[OVER_LENGTH] += len(read) - built.turns


def export_dataset(
    folder: Path,
    checked: tuple[RunSetup, Any],
    options: ExportOptions,
    write: Callable[[bytes], Any],
) -> Tally:
    """Write the records of one dataset folder through `write`, given its checked setup
    and tokenizer (:func:`checked_setup`); return its accounting."""
    setup, tokenizer = checked
    tally = Tally()
    raw = folder / RAW_FILE
    if not raw.exists():
        return tally
    turns: dict[str, int] = {}
    index = index_records(raw, tally, turns)
    ds = _Dataset(folder.name, raw, setup, tokenizer, options, tally, write)
    writer = WRITERS[options.format]
    batch: list[tuple[Prompt, tuple[int, int]]] = []
    with _open(raw) as records:
        for prompt, where in _matching(Path(setup.prompts), index, turns):
            if isinstance(where, list):
                _conversation(ds, prompt, where, records)
                continue
            batch.append((prompt, where))
            if len(batch) >= BATCH:
                _flush(ds, batch, records, writer)
                batch.clear()
        if batch:
            _flush(ds, batch, records, writer)
    tally.skipped[PROMPT_MISSING] += len(index)  # records whose sample the file lacks
    if not tally.skipped[PROMPT_MISSING]:
        del tally.skipped[PROMPT_MISSING]
    return tally


def dataset_folders(
    output_dir: Path,
    names: list[str] | None,
    say: Callable[[str], Any],
    include: Collection[str] = (),
) -> list[Path]:
    """The dataset folders of a run's output: `names` in that order, else every folder
    holding records or a manifest, in name order. ExportError for a name with no folder.

    Only dataset names (watcher.DATASET_NAME) count: a shared output folder may hold a
    folder someone named with terminal escapes or bidi overrides, and its name would be
    printed in every line about it. Such a folder is said once, as data, and left out.
    Folders another user could have written are left out too, said in one line, unless
    `include` names them (the engine's rule: see `folders.py`).
    """
    found = _named_folders(output_dir, names, say)
    kept, left = ours_only(found, include)
    if left:
        say(left_out_line(left, output_dir))
    return kept


def _named_folders(
    output_dir: Path, names: list[str] | None, say: Callable[[str], Any]
) -> list[Path]:
    """:func:`dataset_folders` before the ownership rule."""
    if not output_dir.is_dir():
        raise ExportError(f"output directory {output_dir} does not exist")
    if names:
        folders = [output_dir / name for name in names]
        for folder in folders:
            if not DATASET_NAME.match(folder.name):
                raise ExportError(f"{folder.name!r} is not a dataset name")
            if not folder.is_dir():
                raise ExportError(f"no dataset folder {folder.name!r} in {output_dir}")
        return folders
    found = []
    for child in sorted(output_dir.iterdir()):
        if child.name.startswith(".") or not child.is_dir():
            continue
        if not ((child / RAW_FILE).exists() or (child / MANIFEST_FILE).exists()):
            continue
        if DATASET_NAME.match(child.name):
            found.append(child)
        else:
            say(
                f"gen-tui: skipped {one_line(repr(child.name))} in {output_dir}: not a dataset name"
            )
    return found


def export_run(
    output_dir: Path,
    names: list[str] | None,
    options: ExportOptions,
    write: Callable[[bytes], Any],
    say: Callable[[str], Any],
) -> Tally:
    """Export every chosen dataset through `write`, saying each one's accounting line and
    then the total's. Every dataset's setup is checked before the first row is written."""
    folders = dataset_folders(output_dir, names, say, options.include)
    if not folders:
        raise ExportError(f"{output_dir} holds no dataset folder")
    tokenizers: dict[str, Any] = {}
    checked = [checked_setup(folder, tokenizers) for folder in folders]
    total = Tally()
    for folder, setup in zip(folders, checked, strict=True):
        tally = export_dataset(folder, setup, options, write)
        say(tally.line(folder.name))
        total.add(tally)
    say(total.line("all"))
    return total
