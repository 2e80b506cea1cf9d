"""SSH against a real OpenSSH server on loopback: aliases, host-key refusals, dead links."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest

from gen_tui.backends.hosts.connection import AuthError, HostKeyError, SSHConnection, connect
from gen_tui.backends.hosts.ssh_target import SSHError, SSHOptions, Target
from tests.support.polling import wait_until
from tests.support.sshd import Sshd, keygen


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu-box", Target("gpu-box")),
        ("root@10.0.0.5", Target("10.0.0.5", "root")),
        ("me@host.example:2222", Target("host.example", "me", 2222)),
        ("me@[::1]:22", Target("::1", "me", 22)),
    ],
)
def test_targets_parse(text: str, expected: Target) -> None:
    assert Target.parse(text) == expected
    assert Target.parse(str(expected)) == expected


@pytest.mark.parametrize("text", ["", "a b", "me@host:99999", "me@host:port"])
def test_bad_targets_are_refused(text: str) -> None:
    with pytest.raises(SSHError, match="SSH target"):
        Target.parse(text)


def test_verification_can_never_be_switched_off() -> None:
    kwargs = SSHOptions().connect_kwargs(Target("h"))
    assert "known_hosts" not in kwargs, "the default must be asyncssh's (~/.ssh/known_hosts)"
    assert (kwargs["keepalive_interval"], kwargs["keepalive_count_max"]) == (2.0, 3)


async def test_alias_from_ssh_config_connects(sshd: Sshd) -> None:
    # Only the config file is given: HostName, Port, User, IdentityFile and
    # UserKnownHostsFile all come from the alias, as they would from ~/.ssh/config.
    options = SSHOptions(config_files=(str(sshd.ssh_config),), use_agent=False)
    conn = await connect(sshd.alias, options)
    try:
        result = await conn.run("echo $USER; printf '%s' \"$SSH_CONNECTION\"", check=False)
        user, connection = str(result.stdout).splitlines()
        assert user == "root" and connection.endswith(f" {sshd.port}")
    finally:
        conn.close()


@pytest.mark.quick
async def test_unknown_host_key_is_refused_with_how_to_trust_it(sshd: Sshd) -> None:
    empty = sshd.folder / "known_hosts.empty"
    empty.write_text("")
    with pytest.raises(HostKeyError) as caught:
        await connect(sshd.target, sshd.options(known_hosts=str(empty)))
    message = str(caught.value)
    assert "is not known" in message and "nothing was trusted" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}" in message
    fingerprint = os.popen(f"ssh-keygen -lf {sshd.host_key}.pub").read().split()[1]
    assert fingerprint in message


async def test_changed_host_key_is_refused(sshd: Sshd) -> None:
    impostor = keygen(sshd.folder / "impostor")
    stale = sshd.folder / "known_hosts.stale"
    stale.write_text(f"[127.0.0.1]:{sshd.port} {impostor.with_suffix('.pub').read_text()}")
    with pytest.raises(HostKeyError) as caught:
        await connect(sshd.target, sshd.options(known_hosts=str(stale)))
    message = str(caught.value)
    assert "CHANGED" in message and "Refused" in message
    assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}' -f {stale}" in message
    # A refused first connect is not retried in the background.
    connection = SSHConnection(sshd.target, sshd.options(known_hosts=str(stale)))
    with pytest.raises(HostKeyError):
        await connection.start()
    assert connection.state.startswith("disconnected: host key")
    await connection.close()


async def test_wrong_key_and_closed_port_say_so(sshd: Sshd) -> None:
    stranger = keygen(sshd.folder / "stranger")
    with pytest.raises(AuthError, match="refused every key offered"):
        await connect(sshd.target, sshd.options(client_keys=(str(stranger),)))
    with pytest.raises(SSHError, match=re.escape("cannot reach root@127.0.0.1:1:")):
        await connect("root@127.0.0.1:1", sshd.options())


@pytest.mark.quick
async def test_killed_session_is_seen_and_reconnected(sshd: Sshd) -> None:
    states: list[str] = []
    connection = SSHConnection(
        sshd.alias, sshd.options(), on_state=states.append, backoff_s=(0.2, 0.5)
    )
    sessions: list[str] = []  # what a reconnect hook sees: the new link's session

    async def hook() -> None:
        sessions.append((await connection.run("echo $PPID")).stdout.strip())

    connection.on_reconnect(hook)
    await connection.start()
    try:
        before = {p.pid for p in sshd.sessions()}
        assert (await connection.run("echo up")).stdout == "up\n"
        mine = [p for p in sshd.sessions() if p.pid in before]
        assert mine
        for process in mine:
            process.kill()
        await wait_until(lambda: not connection.connected, 5, "drop noticed")
        await wait_until(lambda: connection.connected, 10, "reconnected")
        assert connection.generation == 2
        await wait_until(lambda: sessions, 5, "the reconnect hook ran")
        assert len(sessions) == 1 and int(sessions[0]) not in before, (sessions, before)
        assert any(s.startswith("disconnected: ") for s in states)
        assert any(s.startswith("reconnecting in ") for s in states)
        assert (await connection.run("echo again")).stdout == "again\n"
    finally:
        await connection.close()
    assert connection.state == "closed"


async def test_frozen_link_is_detected_by_keepalive_within_10s(sshd: Sshd) -> None:
    connection = SSHConnection(sshd.alias, sshd.options(), backoff_s=(0.5,))
    before = {p.pid for p in sshd.sessions()}
    await connection.start()
    frozen = [p for p in sshd.sessions() if p.pid not in before]
    assert frozen
    try:
        for process in frozen:
            os.kill(process.pid, signal.SIGSTOP)  # packets go unanswered, TCP stays up
        frozen_at = time.monotonic()
        await wait_until(lambda: not connection.connected, 12, "dead link noticed")
        assert time.monotonic() - frozen_at <= 10.5
        assert "keepalive" in (connection.last_error or ""), connection.last_error
        await wait_until(lambda: connection.connected, 10, "reconnected to a fresh session")
    finally:
        for process in frozen:
            with_kill(process.pid)
        await connection.close()


def with_kill(pid: int) -> None:
    """End a session process we froze (ours: a child of our own sshd)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alias_config(sshd: Sshd, folder: Path, known_hosts_line: str) -> Path:
    """An ~/.ssh/config alias for the test server, in a home folder of its own."""
    config = folder / ".ssh" / "config"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f"Host boxalias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n"
        f"  IdentityFile {sshd.client_key}\n  {known_hosts_line}\n"
    )
    return config


def _fingerprint(public_key: Path) -> str:
    return os.popen(f"ssh-keygen -lf {public_key}").read().split()[1]


async def test_known_hosts_none_in_ssh_config_does_not_switch_verification_off(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: `UserKnownHostsFile none` in ~/.ssh/config made asyncssh accept any key."""
    monkeypatch.setenv("HOME", str(tmp_path))
    _alias_config(sshd, tmp_path, "UserKnownHostsFile none")
    options = SSHOptions(use_agent=False)  # ~/.ssh/config as found, like a user's
    with pytest.raises(HostKeyError) as caught:
        await connect("boxalias", options)
    message = str(caught.value)
    assert f"boxalias (127.0.0.1:{sshd.port})" in message and "is not known" in message
    assert "UserKnownHostsFile none" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> ~/.ssh/known_hosts" in message
    # With the key in ~/.ssh/known_hosts, the same alias connects: verified, not skipped.
    host_key = (sshd.host_key.parent / (sshd.host_key.name + ".pub")).read_text()
    (tmp_path / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{sshd.port} {host_key}")
    conn = await connect("boxalias", options)
    conn.close()


async def test_a_changed_key_behind_an_alias_names_host_port_and_both_fingerprints(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    impostor = keygen(tmp_path / "impostor")
    stale = tmp_path / "known_hosts.stale"
    stale.write_text(f"[127.0.0.1]:{sshd.port} {impostor.with_suffix('.pub').read_text()}")
    _alias_config(sshd, tmp_path, f"UserKnownHostsFile {stale}")
    with pytest.raises(HostKeyError) as caught:
        await connect("boxalias", SSHOptions(use_agent=False))
    message = str(caught.value)
    assert f"boxalias (127.0.0.1:{sshd.port}) has CHANGED: possible attack" in message
    presented = _fingerprint(Path(f"{sshd.host_key}.pub"))
    assert presented in message and _fingerprint(impostor.with_suffix(".pub")) in message
    assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}' -f {stale}" in message
