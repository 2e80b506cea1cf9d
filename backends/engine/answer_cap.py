"""How long each answer may run: the `max_new_tokens` of every request, in one rule.

Why from the server: a fixed cap is either too low (4,096 cut about 3 answers in 10 of a
dataset averaging 3,793 tokens, silently) or, on a small-context model, too high (a
request whose prompt and cap pass the context is refused). The server knows its context
length, so the rule is:

- the user gave `--max-new-tokens` (or `[sampling] max_new_tokens`): that, but never more
  than the context minus the prompt (a request past the context is refused outright);
- else, the server said its context: min(MAX_NEW_TOKENS_CAP, context - prompt);
- else: DEFAULT_MAX_NEW_TOKENS, said once in the log.

A provider's own cap on an answer (OpenRouter's `top_provider.max_completion_tokens`)
bounds the server's default too. Every request leaves room for at least one token.

The prompt's length: counted by the tokenizer when one is loaded. Without one (an
OpenAI-compatible API run without `--tokenizer`) it is bounded from above instead: each
token of a byte-level or byte-fallback tokenizer stands for at least one byte, so a
prompt is at most its UTF-8 bytes plus the chat template's own tokens. An overestimate
only shortens the cap of a prompt that nearly fills the context; an underestimate would
get the request refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from gen_tui.backends.settings import DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_CAP

TEMPLATE_TOKENS_PER_MESSAGE = 16
"""Chat-template tokens a message may add (role markers, separators), generously."""
TEMPLATE_TOKENS = 64
"""Chat-template tokens a conversation may add on top (system preamble, generation prompt)."""


def prompt_bound(messages: list[dict[str, str]]) -> int:
    """The most tokens `messages` can take once templated (see the module docstring)."""
    size = sum(len(str(m.get("content", "")).encode()) for m in messages)
    return size + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + TEMPLATE_TOKENS


@dataclass(frozen=True)
class AnswerCap:
    """The run's rule for `max_new_tokens`, once the servers have been asked."""

    given: int | None = None
    """The user's cap; None: the servers' rule."""
    context_length: int | None = None
    """The smallest context any server of the run said it serves; None: none said."""
    max_completion_tokens: int | None = None
    """The smallest cap on an answer any server said it applies."""

    @property
    def run_cap(self) -> int:
        """The longest answer of the run, whatever the prompt (what budgets reserve)."""
        if self.given is not None:
            cap = self.given
        elif self.context_length is None and self.max_completion_tokens is None:
            cap = DEFAULT_MAX_NEW_TOKENS
        else:
            cap = MAX_NEW_TOKENS_CAP
            if self.max_completion_tokens is not None:
                cap = min(cap, self.max_completion_tokens)
        if self.context_length is not None:
            cap = min(cap, self.context_length - 1)
        return max(1, cap)

    @property
    def budget_cap(self) -> int:
        """The longest answer budgets reserve: the user's cap as given, else `run_cap`."""
        return self.given if self.given is not None else self.run_cap

    def for_prompt(self, prompt_tokens: int) -> int:
        """The cap of one request whose prompt is `prompt_tokens` long (or at most that)."""
        cap = self.run_cap
        if self.context_length is not None:
            # SGLang refuses a request whose prompt and cap together reach the context.
            cap = min(cap, self.context_length - prompt_tokens - 1)
        return max(1, cap)

    def describe(self) -> str:
        """One line for the log: what the cap is and where it came from."""
        if self.given is not None:
            if self.context_length is None:
                return f"answers capped at {self.given:,} tokens (--max-new-tokens)"
            return (
                f"answers capped at {self.given:,} tokens (--max-new-tokens), and at the "
                f"servers' context of {self.context_length:,} tokens minus the prompt"
            )
        if self.context_length is None and self.max_completion_tokens is None:
            return (
                "the server does not say its context length: answers capped at "
                f"{DEFAULT_MAX_NEW_TOKENS:,} tokens (--max-new-tokens to change it)"
            )
        said = []
        if self.context_length is not None:
            said.append(f"context {self.context_length:,} tokens")
        if self.max_completion_tokens is not None:
            said.append(f"answers up to {self.max_completion_tokens:,}")
        return (
            f"the server says {', '.join(said)}: answers capped at {self.run_cap:,} tokens "
            "less whatever the prompt takes past the context (--max-new-tokens to change it)"
        )
