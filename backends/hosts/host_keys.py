"""Whose host key is this: what `~/.ssh/config` resolves a target to, and the message that
explains a key gen-tui could not verify.

Kept apart from the connection logic in ssh.py because it is about trust, not links: which
known_hosts files apply (never none: `UserKnownHostsFile none` in a config would make
asyncssh verify nothing), which host and port an alias really means, and what a person
should check before trusting a new or changed key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from gen_tui.backends.aio import within
from gen_tui.backends.hosts.ssh_target import SSHOptions, Target

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


@dataclass(frozen=True)
class _Resolved:
    host: str
    port: int
    user: str
    known_hosts: tuple[str, ...]
    unchecked_in_config: bool = False
    """`~/.ssh/config` says `UserKnownHostsFile none` for this host: asyncssh would then
    skip verification, so gen-tui checks against `~/.ssh/known_hosts` instead."""
    unread: bool = False
    """The config could not be resolved here (a garbled or locked `IdentityFile`, which the
    connection itself skips when keys are given): whether it says `UserKnownHostsFile none`
    is unknown, so gen-tui checks against `~/.ssh/known_hosts` too (fail closed)."""


def resolve(target: Target, options: SSHOptions) -> _Resolved:
    """Host, port, user and known_hosts files after `~/.ssh/config` (or the given files)."""
    # No keys: where a host is does not depend on them, and a config's garbled or locked
    # IdentityFile must not stop the resolution (see `unread`).
    kwargs = options.where_kwargs(target) | {"client_keys": None, "agent_path": None}
    unchecked = unread = False
    try:
        resolved = asyncssh.SSHClientConnectionOptions(**kwargs)
        host, port, user = str(resolved.host), int(resolved.port), str(resolved.username)
        files = resolved.known_hosts
        unchecked = files is None
    except (OSError, asyncssh.Error, ValueError):
        host, port, user, files = target.host, target.port or 22, target.user or "?", None
        unread = True
    if options.known_hosts is not None:
        return _Resolved(host, port, user, (options.known_hosts,))
    if isinstance(files, str):
        known: tuple[str, ...] = (files,)
    elif isinstance(files, list | tuple) and files:
        known = tuple(str(f) for f in files)
    else:
        known = (DEFAULT_KNOWN_HOSTS,)
    return _Resolved(host, port, user, known, unchecked, unread)


def _host_pattern(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


async def _presented_key(target: Target, resolved: _Resolved, options: SSHOptions) -> str | None:
    """The fingerprint of the key the server presents (read without trusting it)."""
    config = () if options.config_files is None else list(options.config_files)
    # Keys are not needed to read a host key: a config's unusable IdentityFile is skipped.
    where = asyncssh.SSHClientConnectionOptions(config=config, client_keys=None, agent_path=None)
    try:
        key = await within(
            asyncssh.get_server_host_key(resolved.host, resolved.port, options=where),
            options.connect_timeout_s,
        )
    except (OSError, asyncssh.Error, TimeoutError, ValueError):  # ValueError: a bad key file
        return None
    return key.get_fingerprint("sha256") if key is not None else None


def _known_keys(resolved: _Resolved) -> list[tuple[str, list[str]]]:
    """(path, fingerprints) for each known_hosts file that already holds keys for this host."""
    found = []
    for name in resolved.known_hosts:
        path = Path(name).expanduser()
        if not path.is_file():
            continue
        try:
            keys = asyncssh.read_known_hosts(str(path)).match(resolved.host, "", resolved.port)[0]
        except (OSError, asyncssh.Error, ValueError):
            continue
        if keys:
            found.append((str(path), [key.get_fingerprint("sha256") for key in keys]))
    return found


async def host_key_message(target: Target, options: SSHOptions) -> str:
    """Explain an unverifiable host key: unknown or changed, its fingerprint, how to trust it."""
    resolved = await asyncio.to_thread(resolve, target, options)
    fingerprint = await _presented_key(target, resolved, options)
    where = f"{resolved.host}:{resolved.port}"
    if target.host != resolved.host:
        where = f"{target.host} ({where})"
    file = resolved.known_hosts[0]
    port_flag = "" if resolved.port == 22 else f"-p {resolved.port} "
    keyscan = f"ssh-keyscan {port_flag}{resolved.host} >> {file}"
    shown = fingerprint or "(the server did not answer a second time)"
    note = (
        " (~/.ssh/config sets UserKnownHostsFile none for it: gen-tui verifies host keys "
        f"anyway, against {file})"
        if resolved.unchecked_in_config
        else ""
    )
    holders = await asyncio.to_thread(_known_keys, resolved)
    if holders:
        holder, known = holders[0]
        pattern = _host_pattern(resolved.host, resolved.port)
        return (
            f"host key of {where} has CHANGED: possible attack. The server presents {shown}, "
            f"but {holder} holds {', '.join(known)} for it. Refused: this can be an attack "
            "or a reinstalled server. If you know why it changed, check the new fingerprint "
            "on the server (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then remove the "
            f"old key with `ssh-keygen -R '{pattern}' -f {holder}` and trust the new one with "
            f"`{keyscan}`{note}"
        )
    return (
        f"host key of {where} is not known (no entry in {', '.join(resolved.known_hosts)}); "
        f"nothing was trusted. The server presents {shown}: check it on the server "
        "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then trust it with "
        f"`{keyscan}` (or connect once with ssh and answer yes){note}"
    )


def checked_known_hosts() -> object:
    """What to verify against where the config switched verification off: the default
    known_hosts file if there is one, else no trusted key at all (every key unknown)."""
    path = Path(DEFAULT_KNOWN_HOSTS).expanduser()
    return str(path) if path.is_file() else ([], [], [])


def known_hosts_problem(target: Target, options: SSHOptions) -> str | None:
    """Why the known_hosts files that apply to `target` cannot be read, in one line naming
    the file and the host (None: each is a readable file, or the default one is absent).

    Why: asyncssh opens the files `UserKnownHostsFile` (or `--known-hosts`) names only
    after the server answered, and a missing one or a folder then failed the connection
    as "cannot reach box: No such file or directory", which sends a person to the network,
    not to their ssh config. Only the default `~/.ssh/known_hosts` may be absent: ssh and
    asyncssh both read it as "no key known yet".
    """
    resolved = resolve(target, options)
    where = f"{resolved.host}:{resolved.port}"
    if target.host != resolved.host:
        where = f"{target.host} ({where})"
    named = "--known-hosts" if options.known_hosts is not None else "UserKnownHostsFile"
    for name in resolved.known_hosts:
        path = Path(name).expanduser()
        try:
            if path.is_file():
                with path.open("rb"):
                    pass
                continue
            if not path.exists():
                if name == DEFAULT_KNOWN_HOSTS:
                    continue
                why = "does not exist"
            else:
                why = "is a folder, not a file" if path.is_dir() else "is not a regular file"
        except OSError as exc:
            why = f"cannot be read ({exc.strerror or exc})"
        return (
            f"cannot check the host key of {where}: the known_hosts file {path} "
            f"({named}) {why}; nothing was trusted. Fix {named}, or create the file and "
            "trust the server's key after checking its fingerprint"
        )
    return None
