"""Host keys are verified whatever `~/.ssh/config` holds, even where it cannot be read whole.

The attack, found by an attacker's pass on a fresh clone (issue 16, point 2): gen-tui reads
the config once to learn whether it says `UserKnownHostsFile none` (asyncssh would then
verify nothing) and, if so, verifies against `~/.ssh/known_hosts` itself. That reading
loaded the config's `IdentityFile` too; a garbled key file (or a key asyncssh cannot import)
made it fail, the failure counted as "not none", and the connection, given its key with
`--identity` (so it never loads that file), went ahead with no host-key check at all: any
server was trusted. Now the reading needs no key, and a config that still cannot be read
counts as unverified (fail closed). A real sshd on loopback, a config of a home of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.hosts.connection import HostKeyError, connect
from gen_tui.backends.hosts.ssh_target import SSHOptions
from tests.support.sshd import Sshd


@pytest.mark.parametrize(
    "identity",
    [
        "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n-----END OPENSSH PRIVATE KEY-----\n",
        "garbage\n",
    ],
    ids=["garbled-openssh", "not-a-key"],
)
async def test_an_unreadable_identity_file_never_switches_verification_off(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, identity: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    key = tmp_path / "broken_key"
    key.write_text(identity)
    key.chmod(0o600)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        f"Host boxalias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n"
        f"  IdentityFile {key}\n  UserKnownHostsFile none\n"
    )
    options = SSHOptions(use_agent=False, client_keys=(str(sshd.client_key),))  # --identity
    with pytest.raises(HostKeyError) as caught:
        conn = await connect("boxalias", options)
        conn.close()  # before the fix: connected, and nothing was verified
    message = str(caught.value)
    assert f"boxalias (127.0.0.1:{sshd.port})" in message and "is not known" in message
    assert "The server presents SHA256:" in message and "\n" not in message
    # Trusted in ~/.ssh/known_hosts, the same alias connects: verified, not skipped.
    host_key = (sshd.host_key.parent / (sshd.host_key.name + ".pub")).read_text()
    (tmp_path / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{sshd.port} {host_key}")
    conn = await connect("boxalias", options)
    conn.close()


@pytest.mark.parametrize("variant", ["missing file", "a folder", "missing under ~"])
async def test_a_known_hosts_file_that_is_missing_or_a_folder_is_named(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """Issue 30, point 11: `UserKnownHostsFile` naming a missing file or a folder refused
    as "cannot reach boxalias: No such file or directory", which sends a person to the
    network. The refusal names the known_hosts file, what is wrong with it and the host."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "kh-folder").mkdir()
    named, shown, why = {
        "missing file": (f"{tmp_path}/gone/known_hosts", f"{tmp_path}/gone/known_hosts",
                         "does not exist"),
        "a folder": (f"{tmp_path}/kh-folder", f"{tmp_path}/kh-folder", "is a folder, not a file"),
        "missing under ~": ("~/.ssh/known_hosts_work", f"{tmp_path}/.ssh/known_hosts_work",
                            "does not exist"),
    }[variant]  # fmt: skip
    (tmp_path / ".ssh" / "config").write_text(
        f"Host boxalias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n"
        f"  UserKnownHostsFile {named}\n"
    )
    options = SSHOptions(use_agent=False, client_keys=(str(sshd.client_key),))
    with pytest.raises(HostKeyError) as caught:
        conn = await connect("boxalias", options)
        conn.close()
    message = str(caught.value)
    assert message.startswith(f"cannot check the host key of boxalias (127.0.0.1:{sshd.port})")
    assert f"the known_hosts file {shown} (UserKnownHostsFile) {why}" in message
    assert "nothing was trusted" in message
    assert "No such file or directory" not in message and "\n" not in message
