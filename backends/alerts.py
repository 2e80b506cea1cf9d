"""Alerts: a ping on the user's phone or desktop when a night's run needs them, or is over.

Push services go through apprise (one URL each: Slack, ntfy, Discord, Telegram, email,
`json://` to any HTTP endpoint) rather than clients of our own. The `[alerts]` table of the
TOML names the URLs and which events to send; by default every event.

A send never stops or slows the run: it happens in a thread of its own, one at a time, and
a failure is said once (through `on_failure`) and then only counted. URLs carry tokens, so
anything said about one shows its service and host only (:func:`shown_target`).

The terminal half (the bell, and an OSC 9 / OSC 777 desktop notification where the
terminal has one) is built here as text, and written by the TUI through Textual's driver.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gen_tui.backends.settings import SettingError, read_table, setting
from gen_tui.backends.untrusted import one_line

TITLE_CHARS = 80
BODY_CHARS = 400
"""An alert is a glance: a message longer than this is cut (and said to be)."""
REPEAT_S = 600.0
"""A condition that comes and goes (a full disk, no credits) pings once per this long."""
FLUSH_S = 10.0
"""How long a finishing run waits for its last alerts (the "run ended" one) to go out."""


class AlertEvent(StrEnum):
    """What can raise an alert; the `[alerts] events` names."""

    BUDGET = "budget"
    """A dataset reached its budget."""
    STALE = "stale"
    FAILED = "failed"
    CREDITS = "credits"
    """The API answered 402: out of credits."""
    DISK_FULL = "disk_full"
    HOST_LOST = "host_lost"
    ENDED = "ended"
    """The run is over, however it ended."""
    SERVER = "server"
    """A server gen-tui watches exited, went down, never came up, or is healthy again."""
    TEST = "test"
    """`gen-tui alert --test`: always sent."""


class AlertConfigError(ValueError):
    """An `[alerts]` value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class AlertConfig:
    """The `[alerts]` table: where alerts go and which events raise one."""

    urls: tuple[str, ...] = setting((), key="urls", kinds=(list,))
    events: frozenset[AlertEvent] = setting(
        default_factory=lambda: frozenset(AlertEvent), key="events", kinds=(list,)
    )

    @classmethod
    def parse(cls, table: Mapping[str, Any], where: str = "alerts") -> AlertConfig:
        """The config of a parsed `[alerts]` table; AlertConfigError names a wrong key."""
        try:
            (values,) = read_table(table, where, cls)
        except SettingError as exc:
            raise AlertConfigError(str(exc)) from None
        urls = values.get("urls", [])
        if not all(isinstance(url, str) for url in urls):
            raise AlertConfigError(f"{where}.urls must be a list of apprise URLs (strings)")
        for index, url in enumerate(urls):
            if not _apprise_accepts(url):
                raise AlertConfigError(
                    f"{where}.urls[{index}] is no URL apprise knows (such as ntfy://topic, "
                    "slack://..., json://host:port/path)"
                )
        known = [str(event) for event in AlertEvent if event is not AlertEvent.TEST]
        names = values.get("events", known)
        if not all(isinstance(name, str) for name in names):
            raise AlertConfigError(f"{where}.events must be a list of event names")
        wrong = [name for name in names if name not in known]
        if wrong:
            raise AlertConfigError(
                f"{where}.events: unknown event {wrong[0]!r} (known: {', '.join(known)})"
            )
        return cls(tuple(urls), frozenset(AlertEvent(name) for name in names))

    def wants(self, event: AlertEvent) -> bool:
        return event is AlertEvent.TEST or event in self.events


def _apprise() -> Any:
    """apprise, imported when first needed (it costs a few hundred ms), its own log lines
    kept out of the user's terminal: a failure is said once, by us."""
    import apprise

    log = logging.getLogger("apprise")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return apprise


def _apprise_accepts(url: str) -> bool:
    return bool(url) and "\x00" not in url and _apprise().Apprise().add(url)


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,31})://")
_HOST = re.compile(r"^[A-Za-z0-9.:\[\]-]{1,253}$")


def shown_target(url: str) -> str:
    """`url` as every line about it shows it: the service and, where the URL has one, the
    host and port. Nothing else of it, ever.

    Why so little: apprise's "privacy" form masks passwords but keeps `+Header=` values,
    `-param=` payload values, paths and ntfy topics, and those are the secrets of a
    `json://host/?+Authorization=Bearer%20...` or an `ntfy://TOPIC` target (anyone who knows
    a topic can read it). The host is shown only for a service whose URL template has one:
    in `slack://T1/B2/C3` or `tgram://BOT_TOKEN/chat` what apprise calls the host is a token.
    This is the one function that says what an alert URL may show: `alert --test`,
    `gen-tui run`'s log and the panel's toasts all quote a URL through it.
    """
    scheme = _SCHEME.match(url)
    service = scheme.group(1).lower() if scheme else "alert"
    try:
        targets = _apprise().Apprise()
        targets.add(url)
        plugin = targets[0] if len(targets) else None
    except Exception:  # an odd URL: the service alone
        plugin = None
    if plugin is None:
        return service
    templates = getattr(plugin, "templates", ()) or ()
    host = getattr(plugin, "host", None)
    if not any("{host}" in str(template) for template in templates):
        return service
    if not isinstance(host, str) or not _HOST.match(host):
        return service
    port = getattr(plugin, "port", None)
    where = f"{host}:{port}" if isinstance(port, int) and not isinstance(port, bool) else host
    return f"{service} at {where}"


_MENTION = re.compile(r"(?<![\w.])@(?=\w)|<(?=[!@#])")
"""A mention as chat services read one: `@everyone`, `@here`, `@user` (not the `@` inside
`me@host`), and Slack's `<!channel>`, `<!here>`, `<@U123>`, `<#C123>`."""


def quiet_mentions(text: str) -> str:
    """`text` with every mention broken by a zero-width space, which reads the same.

    Why: an alert quotes what a server or a file said (an error message, a dataset's reason),
    and a Slack, Discord or Teams target would turn `@everyone` or `<!channel>` in it into a
    ping of everyone in the channel, at night, from someone else's text.
    """
    return _MENTION.sub(lambda mention: mention.group() + "\u200b", text)


class Alerter:
    """Sends alerts to the configured URLs, one at a time in a thread, never raising."""

    def __init__(
        self,
        config: AlertConfig,
        on_failure: Callable[[str], None] | None = None,
        *,
        in_a_run: bool = True,
    ) -> None:
        """`in_a_run`: the failure line says the run goes on; False where there is no run
        (`gen-tui alert --test`), where those words would be untrue."""
        self.config = config
        self._on_failure = on_failure
        self._in_a_run = in_a_run
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[bool]] = []
        self._lock = threading.Lock()
        self.sent = 0
        self.failed = 0

    def send(self, event: AlertEvent, title: str, body: str) -> Future[bool] | None:
        """Queue an alert (returns at once); None when no URL wants it."""
        if not self.config.urls or not self.config.wants(event):
            return None
        title = quiet_mentions(one_line(title, TITLE_CHARS))
        body = quiet_mentions(one_line(body, BODY_CHARS))
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="gen-tui-alerts")
            future = self._executor.submit(self._deliver, title, body)
            self._pending = [f for f in self._pending if not f.done()] + [future]
        return future

    def _deliver(self, title: str, body: str) -> bool:
        failures = []
        for url in self.config.urls:
            try:
                targets = _apprise().Apprise()
                targets.add(url)
                # as text: apprise escapes it for an HTML or Markdown target, so a server's
                # `<a href=...>` or `[text](url)` quoted in an alert is never a live link
                ok = bool(targets.notify(title=title, body=body, body_format="text"))
            except Exception as exc:  # a push service is never worth a run
                ok = False
                # its type only: its text may quote the URL, secrets and all
                reason = f"{type(exc).__name__} while sending"
            else:
                reason = "the service refused it or could not be reached"
            if not ok:
                failures.append(f"{shown_target(url)} ({reason})")
        if failures:
            self.failed += 1
            if self.failed == 1 and self._on_failure is not None:
                after = "; the run goes on (later failures are not said again)"
                self._on_failure(
                    f"an alert could not be sent to {'; '.join(failures)}"
                    + (after if self._in_a_run else "")
                )
            return False
        self.sent += 1
        return True

    def close(self, timeout: float = FLUSH_S) -> None:
        """Wait up to `timeout` for queued alerts, then let the thread go."""
        with self._lock:
            pending, executor = list(self._pending), self._executor
            self._executor = None
        for future in pending:
            try:
                future.result(timeout=timeout)
            except Exception:  # timed out: the thread is a daemon's, the process may end
                break
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def terminal_notification(title: str, body: str, env: Mapping[str, str] | None = None) -> str:
    """The escape sequence that raises a desktop notification in this terminal, or "" when
    it is not known to have one (the bell alone then).

    OSC 9 (iTerm2, WezTerm, Windows Terminal, kitty, ConEmu, Ghostty) takes one text; OSC
    777 (urxvt, foot, Ghostty, VTE terminals) a title and a body. Inside tmux the sequence
    is wrapped for passthrough (tmux needs `allow-passthrough on` to let it out). The texts
    are from servers and files: control characters and `;` are taken out, so nothing can
    end the sequence early and write to the terminal itself.
    """
    env = os.environ if env is None else env
    program = env.get("TERM_PROGRAM", "")
    term = env.get("TERM", "")
    title, body = (
        one_line(text, limit).replace(";", ",").replace("\ufffd", "?")
        for text, limit in ((title, TITLE_CHARS), (body, BODY_CHARS))
    )
    if program in ("iTerm.app", "WezTerm", "ghostty") or "kitty" in term or env.get("WT_SESSION"):
        sequence = f"\x1b]9;{title}: {body}\x07"
    elif term.startswith(("rxvt", "foot")) or env.get("VTE_VERSION"):
        sequence = f"\x1b]777;notify;{title};{body}\x07"
    else:
        return ""
    if env.get("TMUX"):
        sequence = "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence
