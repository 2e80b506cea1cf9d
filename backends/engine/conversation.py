"""`--turns all`: one conversation regenerated turn by turn in one slot (issue 35).

Why one task a conversation: turn k's request carries the answers to turns 1..k-1, so a
conversation has one turn in flight at a time, and many conversations fill the pool as
many prompts do. The task keeps its slot and its in-flight entry from its first turn to
its last, so the budget sees the turns it has still to send (`InFlight.turns_left`) and a
conversation once begun is finished, not cut mid-way by the budget.

Exactly once: each turn's answer is written (a record naming its conversation, turn and
turn count) before the next turn is built from it; a turn that has a record is never sent
again: on a resume the turns on disk are the history (`DatasetRun.history`), and a turn
whose answer could not be written ends the conversation for this run (the next run goes
on from the turns on disk), so no conversation on disk has a gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.feeder import Feeder
from gen_tui.backends.engine.runner import RequestRunner
from gen_tui.backends.store.conversations import turn_count, turn_key, turn_messages
from gen_tui.backends.store.prompts import Prompt

RequestCap = Callable[[Prompt, list[int] | None], int]
"""A request's max_new_tokens from its prompt and ids (the engine's `_request_cap`)."""


class ConversationRunner(RunPart):
    """Runs one conversation's turns in order through the request runner."""

    def __init__(
        self, run: RunContext, runner: RequestRunner, feeder: Feeder, request_cap: RequestCap
    ) -> None:
        super().__init__(run)
        self.runner = runner
        self.feeder = feeder
        self.request_cap = request_cap

    async def run(self, ds: DatasetRun, entry: InFlight, prompt: Prompt) -> None:
        """Send the turns of `prompt` not on disk yet, in order; `entry` (registered by the
        dispatcher) is removed when the conversation ends, whatever ends it."""
        try:
            await self._turns(ds, entry, prompt)
        finally:
            ds.inflight.remove(entry)
            self.runner.affinity.pop((ds.name, prompt.key), None)

    async def _turns(self, ds: DatasetRun, entry: InFlight, prompt: Prompt) -> None:
        turns = turn_count(prompt.messages)
        on_disk = ds.history.pop(prompt.key, {})
        answers: list[str] = []
        for turn in range(1, turns + 1):
            entry.turns_left = turns - turn
            if turn_key(prompt.key, turn) in ds.done:
                kept = on_disk.get(turn)
                if kept is None:  # the scan saw it, the history read did not: never guess
                    self.reporter.event(
                        "warning",
                        f"{ds.name}: conversation {prompt.sample_id!r}: turn {turn} is on disk "
                        "but could not be read back; its later turns are left for a later run",
                    )
                    return
                answers.append(kept.text)
                continue
            messages = turn_messages(prompt.messages, turn, answers)
            try:
                ids, tokens = await self.feeder.encode(messages)
            except ValueError as exc:
                ds.malformed += 1
                self.reporter.event(
                    "warning",
                    f"{ds.name}: {ds.spec.prompts}:{prompt.line}: turn {turn} of {turns} not "
                    f"sent: {exc}",
                )
                return
            request = dataclasses.replace(
                prompt, messages=messages, turn=turn, turns=turns, tokens=tokens
            )
            cap = self.request_cap(request, ids)
            entry.max_new_tokens = cap
            answer = await self.runner.send(ds, entry, request, ids, cap)
            if answer is None or (self.signals.stopping and turn < turns):
                return  # given up, not written, or the run stops: resumed from disk later
            answers.append(answer.text or "")
