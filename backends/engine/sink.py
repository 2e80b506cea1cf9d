"""The dataset sink: each dataset's folder, where answers become records.

A response counts only once it is written (one `write()` of a whole line); a sample is
written at most once. A full disk is the one write failure that ends by itself, so it is
waited out (the disk gate) with the answers in hand kept in memory; any other write
failure ends the run, because a run that went on would burn server time on answers it
cannot keep. The folder's lock, resume scan and errors file live here too; progress.json
and the history are views, in `views.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gen_tui.backends.aio import wait_event
from gen_tui.backends.alerts import AlertEvent
from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.rules import BudgetMode, length_model
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.config.run import EngineError
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.view_files import RunViews
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.store.conversations import turns_on_disk
from gen_tui.backends.store.lock import LockHeld
from gen_tui.backends.store.manifest import RunSetup, file_sha256, public_url, record_setup
from gen_tui.backends.store.prompts import NotARegularFile, Prompt
from gen_tui.backends.store.records import (
    RAW_FILE,
    BadFile,
    Completion,
    RecordFileError,
    RecordWriter,
    error_line,
    open_private,
    prepare_dataset_folder,
    quarantine_torn_tail,
    scan_records,
)

FULL_NOTE_S = 60.0
"""A disk that fills again within this long of its last "full" notice gets a short one."""
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Write errors that end when someone makes room: the run waits them out."""


def _held_message(held: int) -> str:
    return f"disk full: {held} answers held, waiting for room"


class NoSpace(Exception):
    """A record could not be written for lack of space; nothing of it is in the file."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")


class DatasetSink(RunPart):
    """Opens, writes and closes every dataset folder of a run."""

    def __init__(self, run: RunContext, cost: CostMeter) -> None:
        super().__init__(run)
        self.cost = cost
        self._full_said_at = -FULL_NOTE_S
        self.views = RunViews(run)
        self.lanes = {lane.url: lane for lane in self.config.fleet}
        """A mixed fleet's lanes by URL: each record names its lane and API."""

    # opening: lock, scan, repair

    def _setup(self, ds: DatasetRun, template_sha256: str | None) -> RunSetup:
        """What this run generates `ds` with, for its manifest (export rebuilds ids from it)."""
        tokenizer = self.config.tokenizer
        if tokenizer and Path(tokenizer).expanduser().exists():
            tokenizer = str(Path(tokenizer).expanduser().resolve())
        return RunSetup(
            prompts=str(ds.spec.prompts.resolve()),
            prompts_sha256=file_sha256(ds.spec.prompts),
            tokenizer=tokenizer,
            chat_template_sha256=template_sha256,
            sampling=dict(self.config.sampling),
            api=self._api(),
            model=self.config.model,
            servers=self._servers(),
        )

    def _api(self) -> str:
        """The run's API; over a mixed fleet its lanes' (`openai+sglang`: export then checks
        no record's ids against the box's native count, as for any OpenAI answer)."""
        if not self.lanes:
            return self.config.api
        return "+".join(sorted({lane.api for lane in self.lanes.values()}))

    def _servers(self) -> list[str]:
        """Every server, as the manifest lists it; over a mixed fleet each lane spelt as
        `--lane` takes it (name, public URL, API, price per million)."""
        if not self.lanes:
            return [public_url(url) for url in self.config.server_urls]
        return [
            f"{lane.name}={public_url(lane.url)},api={lane.api},"
            f"price={lane.price_per_million[0]:g}/{lane.price_per_million[1]:g}"
            for lane in self.lanes.values()
        ]

    def _open_dataset(self, ds: DatasetRun, template_sha256: str | None = None) -> None:
        """Lock, scan and repair one dataset folder, and note the run's setup in its
        manifest (runs in a worker thread)."""
        if not ds.spec.prompts.is_file():
            why = "is not a regular file" if ds.spec.prompts.exists() else "does not exist"
            raise EngineError(f"{ds.name}: prompt file {ds.spec.prompts} {why}")
        try:
            prepare_dataset_folder(ds.folder)
        except BadFile as exc:
            raise EngineError(f"{ds.name}: {exc}") from None
        ds.lock.acquire()
        raw = ds.folder / RAW_FILE
        try:
            scan = scan_records(raw)
        except RecordFileError as exc:
            raise EngineError(
                f"{exc}; move the damaged line out of the file (or fix it) and start again"
            ) from None
        side = quarantine_torn_tail(raw, scan)
        if side is not None:
            self.reporter.event(
                "warning",
                f"{ds.name}: moved a torn last line ({side.stat().st_size} bytes, left by a crash) "
                f"from {raw} to {side}",
            )
        if scan.duplicates:
            self.reporter.event(
                "warning", f"{ds.name}: {raw} already holds {scan.duplicates} duplicate sample_ids"
            )
        ds.done = scan.done
        partial = {key for key in scan.turn_counts if key not in scan.done}
        ds.conversations_done = len(scan.turn_counts) - len(partial)
        ds.history = turns_on_disk(raw, partial)
        ds.begun_read = not ds.history
        ds.tokens = ds.resumed_tokens = scan.tokens
        ds.samples = ds.resumed_samples = scan.records
        ds.truncation.truncated = scan.truncated
        ds.model = length_model(self.config.budget_mode, self.answer_limit.tokens, scan.lengths)
        ds.expected = ExpectedLengths(self.answer_limit.tokens, scan.lengths)
        record_setup(ds.folder, ds.name, self._setup(ds, template_sha256), scan.records)
        ds.writer = RecordWriter(raw)
        self.views.open(ds)
        self._warn_truncation(ds)  # a resumed file may be past the warning already

    async def open_all(
        self, executor: ThreadPoolExecutor, template_sha256: str | None = None
    ) -> None:
        """Open every folder in turn, off the loop; a folder that cannot be used ends the run."""
        loop = asyncio.get_running_loop()
        for ds in self.datasets:
            try:
                await loop.run_in_executor(executor, self._open_dataset, ds, template_sha256)
            except LockHeld as exc:
                raise EngineError(str(exc)) from None
            except NotARegularFile as exc:  # its prompt file: a FIFO, or another user's link
                raise EngineError(f"{ds.name}: cannot read its prompt file: {exc}") from None
            except OSError as exc:  # a read-only or full output folder, say
                where = exc.filename or ds.folder
                raise EngineError(
                    f"{ds.name}: cannot write in {where}: {exc.strerror or exc}"
                ) from None

    # writing

    async def keep(self, ds: DatasetRun, prompt: Prompt, gen: Generation, server: str) -> None:
        """Commit a complete answer, holding it through a full disk until there is room.

        A full disk is the one write failure that ends by itself, when someone deletes a
        checkpoint or a log. The answer in hand cost GPU time: it stays in memory, is tried
        again every `disk_probe_s`, and dispatch waits meanwhile. A stop gives it one last
        try, then it is counted unwritten (it is generated again on resume).
        """
        while True:
            try:
                self._commit(ds, prompt, gen, server)
            except NoSpace as exc:
                if self.signals.stopping:
                    ds.unwritten += 1
                    return
                await self._wait_for_space(ds, exc)
                continue
            if not self.signals.space.is_set():
                if any(other.held for other in self.datasets):
                    self.signals.retry_held()  # room for one may be room for all
                else:  # every held answer is in: the disk has room again
                    self.signals.space.set()
                    self.reporter.event(
                        "info", f"{ds.name}: the disk has room again: dispatch resumed"
                    )
            return

    async def _wait_for_space(self, ds: DatasetRun, exc: NoSpace) -> None:
        if self.signals.space.is_set():
            self.signals.space.clear()
            now = time.monotonic()
            if now - self._full_said_at < FULL_NOTE_S:
                # A disk at the edge lets a few answers in and fills again: say it shortly.
                self.reporter.event(
                    "warning", f"{ds.name}: the disk is full again: dispatch paused"
                )
            else:
                self.reporter.event(
                    "error",
                    f"{ds.name}: {exc}; dispatch paused. Answers already generated are held in "
                    "memory and written as soon as there is room (tried every "
                    f"{self.config.disk_probe_s:g} s): make room, or stop the run and resume "
                    "it later",
                )
                self.reporter.alert(
                    AlertEvent.DISK_FULL, f"{ds.name}: {exc}; dispatch paused", repeat=False
                )
            self._full_said_at = now
        ds.held += 1
        ds.message = _held_message(ds.held)
        try:
            await wait_event(self.signals.retry_now, self.config.disk_probe_s)
        finally:
            ds.held -= 1
            if ds.message.startswith("disk full"):
                ds.message = _held_message(ds.held) if ds.held else ""

    def _commit(self, ds: DatasetRun, prompt: Prompt, gen: Generation, server: str) -> None:
        key = prompt.record_key
        if key in ds.done:
            return
        if (
            self.config.budget_mode is BudgetMode.STRICT
            and ds.budget.max_tokens is not None
            and ds.tokens + gen.completion_tokens > ds.budget.max_tokens
        ):
            self.reporter.event(
                "warning",
                f"{ds.name}: dropped a {gen.completion_tokens}-token response that would pass "
                "the strict budget (the server exceeded max_new_tokens)",
            )
            return
        assert ds.writer is not None
        self.reporter.refusals = 0
        cost = self.cost.price(gen, server)
        lane = self.lanes.get(server)
        line = Completion(
            sample_id=prompt.sample_id,
            completion_tokens=gen.completion_tokens,
            prompt_tokens=gen.prompt_tokens,
            finish_reason=gen.finish_reason,
            output_ids=gen.output_ids,
            text=gen.text,
            latency_s=gen.latency_s,
            server=server,
            cost=cost,
            reasoning=gen.reasoning,
            ids_gap=gen.ids_gap,
            turn=prompt.turn,
            turns=prompt.turns,
            api=lane.api if lane is not None else None,
            lane=lane.name if lane is not None else None,
        ).to_line()
        try:
            ds.writer.write(line)
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise NoSpace(ds.writer.path, exc) from None
            ds.unwritten += 1  # not done: sent again on resume
            self.disk_failure(ds, ds.writer.path, exc)
            return
        if cost is not None:
            ds.cost += cost
            ds.priced = True
        was_reached = ds.reached
        ds.record(key, gen.completion_tokens, gen.latency_s)
        if lane is not None:
            ds.lane_tokens[lane.name] = ds.lane_tokens.get(lane.name, 0) + gen.completion_tokens
        if prompt.turn is not None and prompt.turn == prompt.turns:
            ds.done.add(prompt.key)  # its last turn: the conversation is whole on disk
            ds.conversations_done += 1
        ds.quality.answer(gen.completion_tokens, gen.finish_reason, gen.latency_s)
        self._watch_truncation(ds, gen)
        if not was_reached and ds.reached:
            self.reporter.event("info", f"{ds.name}: crossed its budget at {ds.tokens:,} tokens")
            self.reporter.budget(ds, "crossed")

    def _watch_truncation(self, ds: DatasetRun, gen: Generation) -> None:
        """Count an answer cut at its cap; say so when the dataset's share passes the warning."""
        ds.truncation.observe(gen.finish_reason)
        self._warn_truncation(ds)

    def _warn_truncation(self, ds: DatasetRun) -> None:
        """Log the share of the file's answers cut at their cap, when it is news (a resumed
        30% with this run's 0% so far is still 30%: the records are one dataset)."""
        warning = ds.truncation.warning(
            ds.name, ds.samples, self.config.truncated_warn, self.answer_limit.tokens
        )
        if warning is not None:
            self.reporter.event("warning", warning)

    def note_failure(
        self, ds: DatasetRun, prompt: Prompt, exc: RequestFailed, attempts: int
    ) -> None:
        """Add a given-up sample to errors.jsonl; it is sent again on the next run."""
        try:
            with open_private(ds.errors_path) as handle:
                handle.write(error_line(prompt.sample_id, exc.reason, attempts, exc.status))
        except OSError as error:
            if error.errno not in NO_SPACE:
                self.disk_failure(ds, ds.errors_path, error)
            elif not ds.errors_failed:  # the sample is not done either way: sent next run
                self.reporter.event(
                    "warning",
                    f"{ds.name}: cannot note failed samples in {ds.errors_path}: "
                    f"{error.strerror}; they are sent again on the next run all the same",
                )
            ds.errors_failed = True

    def disk_failure(self, ds: DatasetRun, path: Path, exc: OSError) -> None:
        """A record or error line could not be written (read-only, I/O error; not a full disk,
        which `keep` waits out).

        Stop dispatching and drain, and end the run with one clear line. Nothing counts that
        is not on disk, and a half-written line has been cut off, so a later run resumes.
        """
        self.reporter.fail(
            f"{ds.name}: cannot write {path}: {exc.strerror or exc}; the records already "
            "written are intact: make it writable, then run the same command again to resume"
        )

    # progress and durability

    def write_progress(self, snapshot: RunSnapshot) -> None:
        """Write the views (progress.json, history.jsonl); a failure never stops the run."""
        self.views.write(snapshot)

    async def sync(self) -> None:
        """fsync every record file in a worker thread; a failure ends the run."""
        loop = asyncio.get_running_loop()
        for ds, exc in await loop.run_in_executor(None, self._sync_writers):
            self.disk_failure(ds, ds.folder / RAW_FILE, exc)

    def _sync_writers(self) -> list[tuple[DatasetRun, OSError]]:
        failures = []
        for ds in self.datasets:
            writer = ds.writer
            if writer is not None:
                try:
                    writer.sync()
                except OSError as exc:
                    failures.append((ds, exc))
        return failures

    def close(self) -> None:
        """Close the record files and release the locks, saying what could not be written."""
        for ds in self.datasets:
            if ds.unwritten:
                self.reporter.event(
                    "warning",
                    f"{ds.name}: {ds.unwritten} completed responses could not be written; "
                    "they are generated again on resume",
                )
            if ds.writer is not None:
                with contextlib.suppress(OSError):  # fsync on a failing disk: said already
                    ds.writer.close()
                ds.writer = None
            ds.lock.release()
