"""Every setting of a run in one place: its `[run]` key, its flag, its checks, its default.

Why: the TOML file, `gen-tui run`'s flags and :class:`EngineConfig` were three schemas
merged by hand, with defaults written again at each (the 30 s grace stood in nine places).
Now each field of `EngineConfig` carries a :class:`Setting` in its metadata and its default
in the field alone; `config.py` validates `[run]` from them, `cli.py` builds its flags from
them and merges flag over file over default without knowing any default itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.figures import CountError, parse_count

DEFAULT_GRACE_S = 30.0
"""How long a stopped run drains its in-flight answers, and so how long `k` waits for it
before SIGKILL: the run and the panel must agree on it."""
DEFAULT_MAX_NEW_TOKENS = 4096
"""The cap on an answer's length when neither the user (`--max-new-tokens`) nor the server
(its context length) says: the one fixed default (see answer_cap.py for the rule)."""
MAX_NEW_TOKENS_CAP = 32768
"""The most an answer may run when the cap comes from the server's context length.

Why 32,768: long-tailed answers need room (B2 averages 3,793 tokens with a tail past
16k, so a 4,096 cap cut about 3 answers in 10), yet an answer that loops without an end
must not run to a 128k or 1M context: that costs a slot for minutes, and the strict budget
reserves each request's cap. 32k keeps all but a very few real answers whole."""
DEFAULT_TRUNCATED_WARN = 5.0
"""The share (percent) of a dataset's answers cut at max_new_tokens past which the run says
so (log and panel): a few cut answers are a long tail, more are a cap set too low."""
TRUNCATED_MIN_ANSWERS = 20
"""Answers a dataset must have before its truncated share is judged (1 cut of 3 is noise)."""
DEFAULT_SERVER = "http://127.0.0.1:30000"
DEFAULT_CONCURRENCY = 64
AUTO = "auto"
"""`--concurrency auto`: the engine tunes the requests in flight to the servers' load."""
AUTO_MAX_CONCURRENCY = 512
"""The most `--concurrency auto` ever sends at once, when the servers do not say their batch
size (SGLang's max_running_requests caps it when they do)."""
DEFAULT_IDLE_TIMEOUT_S = 120.0
"""The longest a server may go quiet in the middle of an answer (see clients/limits.py)."""
DEFAULT_MAX_PROMPT_TOKENS = 32768
"""The longest prompt sent, in tokens: see EngineConfig.max_prompt_tokens for why."""
DEFAULT_STALE_AFTER_S = 60.0
"""A running dataset with no new record for this long is stale (a hint to press `k`)."""


class SettingError(ValueError):
    """A value a setting cannot take; the message names the flag."""


@dataclass(frozen=True)
class Setting:
    """How one run setting is spelt in a TOML `[run]` table and on `gen-tui run`'s line."""

    key: str
    """The `[run]` key."""
    flag: str
    help: str
    kinds: tuple[type, ...]
    """The TOML value types accepted (a count also takes a string such as "10M")."""
    count: bool = False
    """A whole number that accepts 10M, 2.5e6, 500k, 10_000_000."""
    minimum: float | None = None
    above: float | None = None
    """The value must be greater than this (seconds that must be positive)."""
    choices: tuple[str, ...] | None = None
    flag_kwargs: tuple[tuple[str, Any], ...] = ()
    """Extra argparse arguments (an alias, `action="append"`, a metavar)."""
    group: str = "server"
    """Where `gen-tui run --help` lists it."""
    words: tuple[str, ...] = ()
    """Words taken as they are instead of a value (`auto` for --concurrency)."""

    def convert(self, value: Any, name: str | None = None) -> Any:
        """The value as the engine takes it, checked; raise :class:`SettingError` naming
        it as `name` (the flag by default, `run.KEY` for a config file)."""
        name = name or self.flag
        if isinstance(value, str) and value in self.words:
            return value
        if self.count and isinstance(value, str):
            try:
                value = parse_count(value, what=name)
            except CountError as exc:
                raise SettingError(str(exc)) from None
        if self.choices is not None and str(value) not in self.choices:
            raise SettingError(f"{name} {value!r} is not one of {', '.join(self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise SettingError(f"{name} must be at least {self.minimum:g}, got {value:g}")
        if self.above is not None and not value > self.above:
            raise SettingError(f"{name} must be more than {self.above:g}, got {value:g}")
        return value


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    **spelling: Any,
) -> Any:
    """A dataclass field that is also a run setting (see :class:`Setting`)."""
    kwargs = spelling.pop("flag_kwargs", {})
    metadata = {"setting": Setting(flag_kwargs=tuple(kwargs.items()), **spelling)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class FieldSetting:
    """A setting with the field it fills and that field's default."""

    name: str
    setting: Setting
    default: Any

    @property
    def help(self) -> str:
        shown = self.default
        if isinstance(shown, list):
            shown = ", ".join(map(str, shown))
        if shown is None or shown is False or shown == "":
            return self.setting.help
        if isinstance(shown, float):
            shown = f"{shown:g}"
        return f"{self.setting.help} (default {getattr(shown, 'value', shown)})"


def settings_of(cls: type) -> Iterator[FieldSetting]:
    """The run settings among the fields of dataclass `cls`, in field order."""
    for item in dataclasses.fields(cls):
        spelled = item.metadata.get("setting")
        if spelled is None:
            continue
        if item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = None if item.default is dataclasses.MISSING else item.default
        yield FieldSetting(item.name, spelled, default)
