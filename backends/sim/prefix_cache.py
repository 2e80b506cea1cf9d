"""The simulator's prefix cache, as far as a client can see it: SGLang's radix cache keeps a
finished request's prompt and answer, so a conversation's next turn, whose prompt starts
with that history, finds it cached on the server that answered the earlier turn, and on no
other (issue 35: why `--turns all` keeps a conversation on one server).

What counts as a conversation: a /generate rid `dataset/sample#turn/...`, gen-tui's rid of a
`--turns all` turn. Turn k's prompt is a hit for `min(prompt, history)` tokens when this
server finished turn k-1 of the same conversation, `history` being that turn's prompt and
answer. Other rids (single prompts, chat completions) count their prompt as a miss.
Nothing is evicted but the oldest conversations past `CONVERSATIONS` (a bound on memory,
not a model of SGLang's eviction); the rate is over the server's life, where SGLang's
`sglang:cache_hit_rate` is over recent batches.
"""

from __future__ import annotations

from collections import OrderedDict

CONVERSATIONS = 100_000
"""Conversations remembered at most (the oldest forgotten first)."""


def conversation_turn(rid: str) -> tuple[str, int] | None:
    """(conversation, turn) of a `--turns all` rid, None for any other rid."""
    head = rid.rsplit("/", 1)[0] if rid.count("/") >= 2 else rid
    conversation, mark, turn = head.rpartition("#")
    if not mark or "/" not in conversation or not turn.isdigit():
        return None
    return conversation, int(turn)


class PrefixCache:
    """Prompt tokens seen and those found cached (for `cache_hit_rate`)."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self._kept: OrderedDict[str, tuple[int, int]] = OrderedDict()
        """conversation -> (the turn last finished here, its prompt + answer tokens)."""

    def admit(self, rid: str, prompt_tokens: int) -> int:
        """Count a request's prompt; return how many of its tokens were cached."""
        self.prompt_tokens += prompt_tokens
        known = conversation_turn(rid)
        if known is None:
            return 0
        kept = self._kept.get(known[0])
        if kept is None or kept[0] != known[1] - 1:
            return 0
        hit = min(prompt_tokens, kept[1])
        self.cached_tokens += hit
        return hit

    def finish(self, rid: str, prompt_tokens: int, produced: int) -> None:
        """A request finished here: its conversation's history is in this server's cache."""
        known = conversation_turn(rid)
        if known is None:
            return
        self._kept[known[0]] = (known[1], prompt_tokens + produced)
        self._kept.move_to_end(known[0])
        while len(self._kept) > CONVERSATIONS:
            self._kept.popitem(last=False)

    @property
    def hit_rate(self) -> float:
        """Cached prompt tokens over all prompt tokens (0 before any request)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
