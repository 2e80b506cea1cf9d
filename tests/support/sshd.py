"""A real OpenSSH `sshd` on 127.0.0.1 for the tests, with keys and config of its own.

Everything lives in a temporary folder: a host key, a client key (authorized for the test
user, root), a known_hosts naming the host key, and an `ssh_config` with a `Host` alias, so
the tests reach the server through the same code paths as a user's `~/.ssh` without ever
reading or writing it. The server runs in the foreground (`-D`) as our child and is stopped
by its pid. The `sshd` fixture (tests/conftest.py) holds one for the session.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from gen_tui.backends.hosts.ssh_target import SSHOptions

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ALIAS = "gen-tui-test"


def python38() -> str | None:
    """A real Python 3.8 interpreter if this machine has one (pyenv shims do not count).

    The remote watcher must run on the oldest Python a GPU box may have; where 3.8 exists,
    the tests run it there, over SSH too.
    """
    candidates = [
        shutil.which("python3.8"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8"))),
    ]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.stdout.strip() == "True":
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> Path:
    """A fresh unencrypted key pair at `path` / `path`.pub."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "gen-tui-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path


@dataclass
class Sshd:
    """A running test server and the client-side files that trust it."""

    folder: Path
    port: int
    host_key: Path
    client_key: Path
    known_hosts: Path
    ssh_config: Path
    process: subprocess.Popen[bytes]
    user: str = "root"
    host: str = "127.0.0.1"

    @property
    def target(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def alias(self) -> str:
        """A `Host` alias in our ssh_config (HostName, Port, User, IdentityFile, known_hosts)."""
        return ALIAS

    def options(self, **changes: object) -> SSHOptions:
        """Client options that use only this folder's config, key and known_hosts."""
        values: dict[str, object] = {
            "config_files": (str(self.ssh_config),),
            "known_hosts": str(self.known_hosts),
            "client_keys": (str(self.client_key),),
            "use_agent": False,
        }
        values.update(changes)
        return SSHOptions(**values)  # type: ignore[arg-type]

    def sessions(self) -> list[psutil.Process]:
        """The per-connection sshd processes (direct children of the listener)."""
        try:
            return psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        for child in self.sessions():
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)


def start_sshd(folder: Path, extra_config: Sequence[str] = ()) -> Sshd:
    """Generate keys and config in `folder`, start sshd on a free loopback port, wait for it.
    `extra_config`: more sshd_config lines (`SetEnv PATH=...` for a stand-in program)."""
    if not Path(SSHD).exists():
        pytest.skip("OpenSSH server not installed (apt-get install -y openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation dir
    host_key = keygen(folder / "host_ed25519")
    client_key = keygen(folder / "client_ed25519")
    (folder / "authorized_keys").write_text((folder / "client_ed25519.pub").read_text())
    port = _free_port()
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "MaxSessions 64",
                "MaxStartups 64",
                "PrintMotd no",
                "Subsystem sftp internal-sftp",
                "LogLevel VERBOSE",
                *extra_config,
                "",
            ]
        )
    )
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {(folder / 'host_ed25519.pub').read_text()}")
    ssh_config = folder / "ssh_config"
    ssh_config.write_text(
        f"Host {ALIAS}\n"
        f"  HostName 127.0.0.1\n"
        f"  Port {port}\n"
        f"  User root\n"
        f"  IdentityFile {client_key}\n"
        f"  UserKnownHostsFile {known_hosts}\n"
    )
    log = open(folder / "sshd.log", "wb")  # noqa: SIM115 (the server's stderr for its life)
    process = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    log.close()
    server = Sshd(folder, port, host_key, client_key, known_hosts, ssh_config, process)
    deadline = time.monotonic() + 10
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {(folder / 'sshd.log').read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError("sshd did not start listening within 10 s") from None
            time.sleep(0.05)
    return server
