"""The [alerts] table's checks, the once-only failure line, and the terminal's notification
sequence, which no server text can break out of."""

from __future__ import annotations

import types

import pytest

from gen_tui.backends import alerts
from gen_tui.backends.alerts import (
    AlertConfig,
    AlertConfigError,
    Alerter,
    AlertEvent,
    terminal_notification,
)

HOSTILE = "done\x07\x1b]0;pwned\x1b\\; rm -rf"


def test_alerts_table_defaults_to_every_event_and_checks_its_keys() -> None:
    config = AlertConfig.parse({"urls": ["ntfy://topic"]})
    assert config.wants(AlertEvent.BUDGET) and config.wants(AlertEvent.HOST_LOST)
    only = AlertConfig.parse({"urls": ["ntfy://topic"], "events": ["ended"]})
    assert only.wants(AlertEvent.ENDED) and not only.wants(AlertEvent.STALE)
    assert only.wants(AlertEvent.TEST), "a test alert is always sent"
    with pytest.raises(AlertConfigError, match=r"alerts.urls\[1\] is no URL apprise knows"):
        AlertConfig.parse({"urls": ["ntfy://topic", "nosuch://x"]})
    with pytest.raises(AlertConfigError, match=r"unknown key alerts\.url "):
        AlertConfig.parse({"url": "ntfy://topic"})


@pytest.mark.parametrize(
    ("env", "start"),
    [
        ({"TERM_PROGRAM": "iTerm.app"}, "\x1b]9;"),
        ({"TERM": "xterm-kitty"}, "\x1b]9;"),
        ({"TERM": "foot"}, "\x1b]777;notify;"),
        ({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "\x1b]777;notify;"),
    ],
)
def test_notification_sequence_per_terminal_carries_no_control(env: dict, start: str) -> None:
    sequence = terminal_notification("B1 " + HOSTILE, HOSTILE, env)
    assert sequence.startswith(start) and sequence.endswith("\x07")
    inner = sequence[len(start) : -1]
    assert not any(ord(c) < 32 for c in inner), "a server's text ends no sequence early"
    fields = inner.split(";")
    assert len(fields) == (2 if "777" in start else 1), "no `;` forges a field"


def test_notification_inside_tmux_is_wrapped_and_unknown_terminals_get_none() -> None:
    wrapped = terminal_notification("t", "b", {"TERM_PROGRAM": "WezTerm", "TMUX": "/tmp/x"})
    assert wrapped == "\x1bPtmux;\x1b\x1b]9;t: b\x07\x1b\\"
    assert terminal_notification("t", "b", {"TERM": "xterm-256color"}) == ""


def test_mentions_in_someone_elses_text_ping_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's error quoted in a `failed` alert must not become `@everyone` or Slack's
    `<!channel>` in the chat it is sent to: each mention is broken by a zero-width space."""
    sent: list[tuple[str, str]] = []

    class Targets:
        def add(self, url: str) -> None:
            pass

        def notify(self, title: str, body: str, body_format: str) -> bool:
            assert body_format == "text"
            sent.append((title, body))
            return True

    config = AlertConfig.parse({"urls": ["json://127.0.0.1:1/x"]})
    monkeypatch.setattr(alerts, "_apprise", lambda: types.SimpleNamespace(Apprise=Targets))
    alerter = Alerter(config)
    future = alerter.send(
        AlertEvent.FAILED, "gen-tui: B2 @here", "model @everyone not found <!channel> <@U1>"
    )
    assert future is not None and future.result(5)
    ((title, body),) = sent
    for mention in ("@everyone", "@here", "<!channel>", "<@U1>"):
        assert mention not in title + body
    assert body.replace("\u200b", "") == "model @everyone not found <!channel> <@U1>"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "json://10.0.0.5:8080/p?+Authorization=Bearer%20SECRET&-api_key=SECRET",
            "json at 10.0.0.5:8080",
        ),
        ("ntfy://TOPICSECRET", "ntfy"),
        ("ntfy://push.example/TOPICSECRET", "ntfy at push.example"),
        ("slack://TSECRET/BSECRET/CSECRET", "slack"),
        ("tgram://123456789:SECRET_token/42", "tgram"),
        ("discord://1234/SECRET", "discord"),
        ("mailto://me:SECRET@mail.example", "mailto at mail.example:25"),
        ("nonsense://SECRET", "nonsense"),
    ],
)
def test_a_url_is_shown_as_its_service_and_host_only(url: str, shown: str) -> None:
    assert alerts.shown_target(url) == shown


def test_a_failure_line_carries_no_secret_even_from_an_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The line the TUI's toast, `gen-tui run`'s log and `alert --test` all show: an
    exception's text may quote the whole URL, so only its type is said."""
    url = "json://127.0.0.1:9/x?+Authorization=Bearer%20SECRET&-token=SECRET"

    class Targets(list):  # type: ignore[type-arg]
        def add(self, added: str) -> bool:
            self.append(
                types.SimpleNamespace(templates=("{schema}://{host}",), host="127.0.0.1", port=9)
            )
            return True

        def notify(self, **_: object) -> bool:
            raise ConnectionError(f"cannot reach {url}")

    monkeypatch.setattr(alerts, "_apprise", lambda: types.SimpleNamespace(Apprise=Targets))
    said: list[str] = []
    alerter = Alerter(AlertConfig(urls=(url,)), on_failure=said.append)
    future = alerter.send(AlertEvent.TEST, "t", "b")
    assert future is not None and not future.result(5)
    (line,) = said
    assert "SECRET" not in line
    assert "json at 127.0.0.1:9 (ConnectionError while sending)" in line
