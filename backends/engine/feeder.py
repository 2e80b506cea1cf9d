"""The prompt feed: each dataset's prompts read, tokenized off the loop, and queued.

One worker thread does the reading and tokenizing (and the folder scans, see `sink`), so
the loop never blocks on the tokenizer. Each dataset's queue holds `lookahead` prompts:
enough that a free slot never waits for a tokenizer, few enough that a stop is quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gen_tui.backends.clients.results import Generation
from gen_tui.backends.config.run import EngineError
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun, Queued
from gen_tui.backends.store.conversations import Turns, turn_count, turn_messages
from gen_tui.backends.store.prompts import Prompt, PromptProblem, count_lines, iter_prompts
from gen_tui.backends.tokenizer import TokenizerError, encode_many, encode_turn, load_tokenizer

BATCH = 32
"""Prompts tokenized in the first call into the tokenizer: the first requests go out soon."""
MAX_BATCH = 256
"""Prompts tokenized per call after the first, while the queue has that much room.

The worker thread renders templates in Python, so it needs the GIL, which a busy event loop
hands over only every switch interval (5 ms): each call pays a few such waits whatever its
size. At 32 a call the feed ran at about 1,000 prompts/s against a loop that sends 2,000 a
second, and the queue was found empty at most launches of the client-overhead bench; at
256 it stays full (see BENCHMARKS.md, client overhead)."""


def encode_messages_or_error(tokenizer: Any, messages: list[dict[str, str]]) -> Any:
    """`encode_many` of one conversation: its ids, or the exception the template raised."""
    return encode_many(tokenizer, [messages])[0]


BEGUN_END = object()
"""In a resumed `--turns all` feed, after the conversations begun on disk (`_begun_first`)."""


class Feeder(RunPart):
    """Fills each dataset's queue; `tokenize` is False for a client that takes messages.

    Prompts are tokenized whenever a tokenizer is loaded, even for a client that takes
    messages: that is how a prompt over `--max-prompt-tokens` is found and skipped before it
    is sent. Only a client that needs them gets the ids.
    """

    def __init__(self, run: RunContext, executor: ThreadPoolExecutor, *, tokenize: bool) -> None:
        super().__init__(run)
        self.executor = executor
        self.tokenize = tokenize
        self.tokenizer: Any = None
        self.producers: list[asyncio.Task[None]] = []

    async def load_tokenizer(self) -> None:
        """Load `config.tokenizer`, if given; a client that needs ids cannot run without."""
        if self.config.tokenizer:
            loop = asyncio.get_running_loop()
            try:
                self.tokenizer = await loop.run_in_executor(
                    self.executor, load_tokenizer, self.config.tokenizer
                )
            except TokenizerError as exc:
                raise EngineError(str(exc)) from None
        elif self.tokenize:
            raise EngineError("SGLang's /generate needs input ids: give --tokenizer DIR")

    def open_queue(self, ds: DatasetRun) -> None:
        ds.queue = asyncio.Queue(maxsize=self.config.lookahead or 2 * self.config.max_concurrency)

    def start(self, ds: DatasetRun) -> None:
        """Start feeding `ds` (its queue exists)."""
        self.producers.append(asyncio.create_task(self._produce(ds)))

    def reopen(self, ds: DatasetRun) -> None:
        """Feed a dataset that was done before its feed began (it may have more to do now)."""
        if ds.queue is None:
            self.open_queue(ds)
            self.start(ds)

    async def stop(self) -> None:
        for producer in self.producers:
            producer.cancel()
        await asyncio.gather(*self.producers, return_exceptions=True)

    def _batch(self, path: Path, items: Iterator[Any], size: int) -> list[Any]:
        """The next `size` prompts of `items`, tokenized in one call, and the problems met."""
        out: list[Any] = []
        prompts: list[Prompt] = []
        for item in items:
            if isinstance(item, PromptProblem) or item is BEGUN_END:
                out.append(item)
                continue
            prompts.append(item)
            if len(prompts) >= size:
                break
        if self.tokenizer is None:
            return out + [(prompt, None) for prompt in prompts]
        cap = self.config.max_prompt_tokens
        if self.config.turns is Turns.ALL:  # its first turn: the source's answers are not sent
            sent = [turn_messages(prompt.messages, 1, []) for prompt in prompts]
        else:
            sent = [prompt.messages for prompt in prompts]
        encoded = encode_many(self.tokenizer, sent)
        for prompt, ids in zip(prompts, encoded, strict=True):
            if isinstance(ids, Exception):
                out.append(PromptProblem(path, prompt.line, f"cannot tokenize: {ids}"))
            elif len(ids) > cap:
                out.append(
                    PromptProblem(
                        path,
                        prompt.line,
                        f"prompt is {len(ids):,} tokens, over the {cap:,} allowed "
                        "(--max-prompt-tokens)",
                    )
                )
            else:
                counted = dataclasses.replace(prompt, tokens=len(ids))
                # --turns all: each turn's request is tokenized as it goes out (`encode`)
                whole = self.tokenize and self.config.turns is Turns.LAST
                out.append((counted, ids if whole else None))
        return out

    def _begun_first(self, ds: DatasetRun) -> Iterator[Prompt | PromptProblem | object]:
        """`--turns all` on a resume: the conversations begun on disk first, then the rest
        (read in the worker thread, as `iter_prompts` is). A conversation once begun is
        finished, whatever the budget (the scheduler sends these first, `begun_queued`);
        one whose line is gone from the file is forgotten, said once."""
        found = set()
        for item in iter_prompts(ds.spec.prompts, skip=ds.done):
            if isinstance(item, Prompt) and item.key in ds.history:
                found.add(item.key)
                yield item
        for key in set(ds.history) - found:
            self.reporter.event(
                "warning",
                f"{ds.name}: conversation {key!r} has turns on disk but is not in "
                f"{ds.spec.prompts}: it is left as it is",
            )
        yield BEGUN_END
        yield from iter_prompts(ds.spec.prompts, skip=ds.done | found)

    async def _produce(self, ds: DatasetRun) -> None:
        assert ds.queue is not None
        loop = asyncio.get_running_loop()
        if ds.prompt_lines is None:
            with contextlib.suppress(OSError):  # the read below says what is wrong
                ds.prompt_lines = await loop.run_in_executor(
                    self.executor, count_lines, ds.spec.prompts
                )
        skip = ds.done | ds.held_out if ds.held_out else ds.done
        items = self._begun_first(ds) if ds.history else iter_prompts(ds.spec.prompts, skip)
        size = BATCH
        try:
            while not self.signals.stopping:
                batch: list[PromptProblem | Queued | object] = await loop.run_in_executor(
                    self.executor, self._batch, ds.spec.prompts, items, size
                )
                if not batch:
                    ds.producer_done = True  # read to its end: what is queued is all left
                    break
                begun_read = False
                for item in batch:
                    if item is BEGUN_END:
                        begun_read = True  # said once this batch's begun ones are queued
                        continue
                    if isinstance(item, PromptProblem):
                        ds.malformed += 1
                        self.reporter.event("warning", f"{ds.name}: skipped {item}")
                        continue
                    assert isinstance(item, tuple)
                    prompt = item[0]
                    if prompt.key in ds.history:
                        ds.begun_queued += 1
                    if self.config.turns is Turns.ALL:
                        turns = turn_count(prompt.messages)
                        ds.conversations_fed += 1
                        ds.turns_fed += turns
                        ds.turns_max = max(ds.turns_max, turns)
                    await ds.queue.put(item)
                    self.signals.wake.set()
                if begun_read:
                    ds.begun_read = True
                    self.signals.wake.set()
                room = ds.queue.maxsize - ds.queue.qsize()
                size = min(MAX_BATCH, max(BATCH, room))
        except OSError as exc:
            ds.message = f"cannot read prompts: {exc}"
            self.reporter.event("error", f"{ds.name}: {ds.message}")
            ds.producer_done = True  # no more will come from this file
            ds.begun_read = True
        finally:
            # A feed cancelled at the run's end (or stopped by a signal) has not read its
            # file through: `producer_done` stays False there, or `prompts_left` would count
            # only the prefetched queue (the final progress.json said 128 of 2,500 left).
            self.signals.wake.set()

    async def encode(self, messages: list[dict[str, str]]) -> tuple[list[int] | None, int | None]:
        """(ids for the client, or None if it takes messages; the prompt's length, or None
        without a tokenizer) of one request built at run time: a conversation's next turn.
        Raises ValueError naming why it cannot be sent (untokenizable, over the cap)."""
        if self.tokenizer is None:
            return None, None
        loop = asyncio.get_running_loop()
        encoded = await loop.run_in_executor(
            self.executor, encode_messages_or_error, self.tokenizer, messages
        )
        if isinstance(encoded, Exception):
            raise ValueError(f"cannot tokenize: {encoded}")
        cap = self.config.max_prompt_tokens
        if len(encoded) > cap:
            raise ValueError(
                f"prompt is {len(encoded):,} tokens, over the {cap:,} allowed (--max-prompt-tokens)"
            )
        return (encoded if self.tokenize else None), len(encoded)

    async def attach_ids(
        self, generation: Generation, messages: list[dict[str, str]]
    ) -> Generation:
        """Training needs the target model's ids; an API gives text, so tokenize it here.

        The ids cover the whole turn as the chat template renders it after `messages`,
        reasoning included (see `encode_turn`), and `ids_gap` records how far their count
        is from the server's `completion_tokens`: a tokenizer that is not the model's, or
        a template that renders the turn otherwise, shows up there, per answer.
        """
        if generation.output_ids is not None or self.tokenizer is None:
            return generation
        loop = asyncio.get_running_loop()
        ids = await loop.run_in_executor(
            self.executor,
            encode_turn,
            self.tokenizer,
            messages,
            generation.text or "",
            generation.reasoning,
        )
        gap = len(ids) - generation.completion_tokens
        return dataclasses.replace(generation, output_ids=ids, ids_gap=gap)
