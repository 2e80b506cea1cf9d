"""Every setting in one place: its key in the config file, its flag, its checks, its default.

Why: the TOML file, `gen-tui run`'s flags and :class:`EngineConfig` were three schemas
merged by hand, with defaults written again at each (the 30 s grace stood in nine places).
Now each field of a settings dataclass carries a :class:`Setting` in its metadata and its
default in the field alone: `EngineConfig` (`[run]`), `DatasetDefaults` (the `[run]` values
every dataset shares), `DatasetSpec` (`[[datasets]]`), `Sampling` (`[sampling]`) and
`HostEntry` (`[[hosts]]`). :func:`read_table` validates any of those tables from them, the
command line builds its flags from them, and the merge puts flag over file over default
without knowing any default itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
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
DEMO_STALE_AFTER_S = 15.0
"""The panel demo's (unless `--stale-after` says): its B9_stale never finishes an answer, so
it is stale this long after it starts and the story (`k` on it, then `r` with 10M on B2,
then B2 crossing 10M) goes in that order. At 60 s B2 had crossed 10M before B9 was ever
stale. B1..B8 write records many times a second: 15 s quiet is a real stall for them."""
BATCH_MAX_REQUESTS = 50_000
"""The most requests in one batch: OpenAI's documented limit (providers that copy the Batch
contract copy it or allow less; `--batch-max-requests` lowers it)."""
BATCH_MAX_MB = 200
"""The largest batch input file, in MB: OpenAI's documented limit."""
BATCH_IN_FLIGHT = 8
"""The most batches a run has open at a provider at once."""
BATCH_POLL_S = 30.0
"""Seconds between polls of a batch in flight: a batch takes minutes to hours."""
BATCH_PRICE_SHARE = 0.5
"""A batch token's price against a live one's, for `--price` (providers sell them at about
half); a provider's own `usage.cost` is taken as it says."""
DEFAULT_THEME = "textual-dark"
"""The panel's colours (`[panel] theme`): Textual's own default, named here so the config,
the docs and the app agree on it."""


class SettingError(ValueError):
    """A value a setting cannot take; the message names the flag."""


@dataclass(frozen=True)
class Setting:
    """How one setting is spelt in its TOML table and on `gen-tui run`'s line."""

    key: str
    """The key in its table (`[run]`, `[[datasets]]`, ...)."""
    kinds: tuple[type, ...]
    """The TOML value types accepted (a count also takes a string such as "10M")."""
    count: bool = False
    """A whole number that accepts 10M, 2.5e6, 500k, 10_000_000."""
    flag: str | None = None
    """`gen-tui run`'s flag; None: the setting is the config file's only."""
    aliases: tuple[str, ...] = ()
    """Other spellings of the flag (kept for old command lines)."""
    help: str = ""
    minimum: float | None = None
    above: float | None = None
    """The value must be greater than this (seconds that must be positive)."""
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    flag_kwargs: tuple[tuple[str, Any], ...] = ()
    """Extra argparse arguments (an alias, `action="append"`, a metavar)."""
    group: str = "server"
    """Where `gen-tui run --help` lists it."""
    words: tuple[str, ...] = ()
    """Words taken as they are instead of a value (`auto` for --concurrency)."""
    path: bool = False
    """A path: relative to the config file that gives it, `~` expanded."""
    check: Callable[[Any], object] | None = None
    """A rule of its own for a value in words (`--deadline 07:30`): raises ValueError with
    what was expected; the value is kept as written (when it is meant is the run's to say)."""

    def convert(self, value: Any, name: str | None = None) -> Any:
        """The value as the engine takes it, checked; raise :class:`SettingError` naming
        it as `name` (the flag by default, `run.KEY` for a config file)."""
        name = name or self.flag or self.key
        if isinstance(value, str) and value in self.words:
            return value
        # A setting that also takes a word (`auto`) says so in each refusal: the user who
        # typed a wrong number may be looking for the word.
        words = "".join(f" or {word}" for word in self.words)
        if self.count and isinstance(value, float):
            # A budget set from code (the panel's `r`, the demo's scaling) may come as a
            # float: kept whole, or a line would print `200,000.0` for a budget.
            if not value.is_integer():
                raise SettingError(f"{name} must be a whole number, got {value:g}")
            value = int(value)
        if self.count and isinstance(value, str):
            try:
                value = parse_count(value, what=name)
            except CountError as exc:
                raise SettingError(f"{exc}{words.replace(' or', ', or', 1)}") from None
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as exc:
                raise SettingError(f"{name} {exc}") from None
        if self.choices is not None and str(value) not in self.choices:
            raise SettingError(f"{name} {value!r} is not one of {', '.join(self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise SettingError(f"{name} must be at least {self.minimum:g}{words}, got {value:g}")
        if self.above is not None and not value > self.above:
            raise SettingError(f"{name} must be more than {self.above:g}, got {value:g}")
        if self.maximum is not None and value > self.maximum:
            raise SettingError(f"{name} must be at most {self.maximum:g}, got {value:g}")
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
    required: bool = False
    """The field has no default: its table must give it."""

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
        required = item.default is dataclasses.MISSING and (
            item.default_factory is dataclasses.MISSING
        )
        yield FieldSetting(item.name, spelled, default, required)


def convert_settings(obj: object) -> None:
    """Check each setting of dataclass instance `obj` that has a value by its own rule (the
    same `Setting.convert` a flag and a config key pass), and keep the converted value
    (`concurrency="2k"` is 2000 from here on, as from a file or a flag: comparisons and
    int() need the number). However the object was made, from a file, flags or code, one
    rule decides. Raise :class:`SettingError`."""
    for spelled in settings_of(type(obj)):
        value = getattr(obj, spelled.name)
        if value is not None:
            # object.__setattr__: frozen settings dataclasses (DatasetSpec) convert too.
            object.__setattr__(obj, spelled.name, spelled.setting.convert(value))


def read_table(table: object, where: str, *classes: type) -> tuple[dict[str, Any], ...]:
    """The values a TOML table gives for the settings of the dataclasses `classes` (one dict
    each, by field name): each key known, of its kinds, without a NUL, converted and checked
    by its setting, and every field without a default given. Raise :class:`SettingError`
    naming `where.KEY`. Paths come back as written: the caller knows what they are relative to.

    Several classes share one table where one TOML table feeds several (`[run]`: the run's
    settings and the datasets' defaults)."""
    if not isinstance(table, Mapping):
        raise SettingError(f"[{where}] must be a table")
    spelled = {
        item.setting.key: (index, item)
        for index, cls in enumerate(classes)
        for item in settings_of(cls)
    }
    values: tuple[dict[str, Any], ...] = tuple({} for _ in classes)
    for key, value in table.items():
        if key not in spelled:
            raise SettingError(f"unknown key {where}.{key} (known: {', '.join(sorted(spelled))})")
        index, item = spelled[key]
        kinds = item.setting.kinds
        if isinstance(value, bool) and bool not in kinds:
            raise SettingError(f"{where}.{key} must not be true/false")
        if not isinstance(value, kinds):
            raise SettingError(f"{where}.{key} has the wrong type ({type(value).__name__})")
        if _has_nul(value):
            # TOML allows "\u0000"; no path, URL or command word can hold one, and the OS
            # would refuse it later with a bare ValueError instead of naming the key.
            raise SettingError(f"{where}.{key} contains a NUL character")
        values[index][item.name] = item.setting.convert(value, f"{where}.{key}")
    for index, item in spelled.values():
        if item.required and item.name not in values[index]:
            raise SettingError(f"{where} has no {item.setting.key!r}")
    return values


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False
