"""Drain notices: a server being stopped on purpose tells the runs on its machine.

Why a file: a run sent straight to several servers (repeated `--server-url`, no router)
learns of nothing else; the servers' supervisor drains a server before it stops it, and the
drain only empties it when the runs send it nothing new. So the supervisor writes one small
file per draining server in the user's state folder on the machine the server runs on
(`gen-tui/servers/draining/PORT.json`, beside the servers' state file; written whole, then
renamed), and removes it when the server answers its health check again (started anew),
or when it stops for good (`gen-tui servers stop`, a stop from the panel, a supervisor that
gives up). Every run on that machine looks at the folder every POLL_S and sends no new
request to a server on this machine whose port has a notice; its requests in flight finish
there.

A notice must never outlive its reason (a notice left behind kept a server started later by
hand on that port out of every direct run, and a run whose servers all had one waited for
ever). So a notice names its writer (host, pid, start time): a run on the writer's machine
ignores a notice whose writer is gone (said once); and it says how long its drain lasts at
most (`wait_s`, then the stop's SIGTERM grace `grace_s`): a run with no other server to send
to ignores a notice OVERDUE_S past that, says so in one line, and goes on as with no notice
(a server that does not answer is retried with the usual backoff). A notice written over
SSH names the process carrying the panel's link on the server's machine (watcher/notices.py),
so its writer's end is seen there as a local one's; one whose writer is another machine's
(not known here: an older panel's, or a host with no SSH session process found) is ignored
OVERDUE_S past its drain and grace whether or not another server is up.

A link's end is not the panel's, though: an SSH link that drops and heals (a Wi-Fi blip, a
NAT timeout, sshd's session killed) ends the session process the notice named, and the
panel writes the notice again on its reconnect naming the new one (hosts/ssh.py), 1.3 to
2.4 s after the drop as measured (RELIABILITY.md rows 152 and 154). A run that dropped such
a notice at once sent the draining server 62 to 82 requests in that gap, which its drain
then had to wait for (or cut at its end); with the hold it sends none. So a notice whose
writer is the SSH session of a panel's link (the writer says `link`) and is gone is still
honoured for LINK_HOLD_S after the run first sees it gone, said once; past that it is
ignored as a dead writer's. The hold covers a reconnect and one failed try (the panel's
backoff: a first try 0.8 to 1.2 s after the drop, the next 1.6 to 2.4 s later) and costs a
panel that really died LINK_HOLD_S before its server is used again (5.04 to 5.15 s after
its SIGKILL, row 154; 0.05 to 0.08 s before): a server it was stopping, which a notice kept
out of the runs for a drain of up to minutes anyway. A link that freezes instead (row 155)
leaves its session process alive: the notice holds as a live writer's until the panel's
keepalive gives the link up (about 8 s) and its reconnect writes it again. A panel that
dies behind a frozen link reconnects never, and its session process lives until sshd gives
it up (two hours by default): so a link's notice carries a lease (`lease_s`,
LINK_LEASE_S), which the panel renews every LINK_RENEW_S (the file's time) while the link
lives; past it the notice is left behind. (A notice without one, an older panel's, holds
as before.) A naming of a
"stable" writer instead (a process there that outlives the link) could not tell a panel
that died from a link that dropped: only time can, and the hold bounds it. A writer of this
machine that is no link's (a local panel, `gen-tui servers stop`) cannot come back: its
notice is dropped at once, as before.

A port names one server on one machine, so a notice `PORT.json` applies only to a URL whose
host is this machine (loopback, or its own host name). A server that is a Slurm batch job
runs on a node the panel does not reach, and the runs sent to it (a run in a job of its own
on any node, or on the login node) name it `http://NODE:PORT`: its notice is
`PORT@NODE.json`, written in the servers' folder on the login node (its job's log is there
too, written by the job from its node: that folder is one the nodes share, the user's
home), and it applies to a URL whose host is NODE (and to one of this machine's own when a
run's machine is NODE). The files are anyone's who can write to the
folder (0700, the user's own): each is read to MAX_NOTICE_BYTES at most and one whose
content is not a notice is ignored, said in one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

NOTICE_FOLDER = "draining"
"""The notices' folder, in the servers' state folder."""
MAX_NOTICE_BYTES = 4096
"""A notice is a few dozen bytes: a bigger file is not one."""
MAX_NOTICES = 256
"""Files looked at in the folder at most (one per server of this machine)."""
POLL_S = 0.5
"""How often a run looks at the notices: a drain is seen within this."""
OVERDUE_S = 5.0
"""How long past its drain and grace a notice is still waited on by a run with no other
server (the stop's last steps, a slow link)."""
LINK_HOLD_S = 5.0
"""How long a notice whose writer is a panel's SSH link's session process, now gone, is
still honoured (from a run's first look that saw it gone): long enough for the panel to
reconnect and write it again naming its new link (see the module's docstring)."""
LINK_LEASE_S = 30.0
"""How long a notice written over a panel's SSH link holds without being renewed (the file's
time, this machine's clock): the panel renews it every LINK_RENEW_S while its link lives. A
link that freezes keeps its session process (the notice's writer) alive until sshd gives it
up, two hours by default: a panel that died behind one held its server out of the runs that
long. Longer than the panel's keepalive (about 8 s) and its reconnect, which writes the
notice anew."""
LINK_RENEW_S = 5.0
"""How often a panel renews its notices over a live link (hosts/ssh.py)."""
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_NAME = re.compile(r"^([0-9]{1,5})(?:@([a-z0-9][a-z0-9._-]{0,252}))?\.json$")
_NODE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,252}$")


def local_notice_folder() -> Path:
    """This machine's notices folder (as `servers.state.local_folder` / NOTICE_FOLDER)."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("gen-tui")) / "servers" / NOTICE_FOLDER


def notice_name(port: int, node: str | None = None) -> str:
    """The file name of the notice of the server on `port` (of `node`: a batch job's)."""
    return f"{port}.json" if node is None else f"{port}@{node}.json"


def notice_node(url: str) -> str | None:
    """The node a notice of the server at `url` names (its host, lower case); None when
    the host cannot be one (an IP v6 address, a character a node name has not)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    return host if _NODE.match(host) else None


def process_start(pid: int) -> float | None:
    """When the process `pid` of this machine started (None: there is none)."""
    import psutil  # not at import: the runs' engine imports this module

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def notice_text(
    port: int, url: str, wait_s: float, grace_s: float = 0.0, node: str | None = None
) -> str:
    """A notice's content: the server on `port` (reached at `url`; of `node` when given)
    drains, `wait_s` at most, then is sent SIGTERM (SIGKILL after `grace_s`); written by
    this process."""
    data: dict[str, object] = {
        "port": port,
        "url": url[:200],
        "since": time.time(),
        "wait_s": wait_s,
        "grace_s": grace_s,
        "writer": {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": process_start(os.getpid()),
        },
    }
    if node is not None:
        data["node"] = node
    return json.dumps(data)


def write_notice(
    folder: Path, port: int, url: str, wait_s: float, grace_s: float = 0.0, node: str | None = None
) -> None:
    """Say that the server on `port` (reached at `url`; of `node` when given) drains, for
    `wait_s` at most, then stops within `grace_s`."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".notice.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(notice_text(port, url, wait_s, grace_s, node))
        os.replace(temp, folder / notice_name(port, node))
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def remove_notice(folder: Path, port: int, node: str | None = None) -> bool:
    """The server on `port` (of `node`) serves again: its notice goes (whether there was
    one)."""
    try:
        (folder / notice_name(port, node)).unlink()
    except FileNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class Notice:
    """One notice as a run reads it: when it was written and when its drain ends at most."""

    port: int
    since: float
    """Wall-clock time it was written."""
    ends: float
    """Wall-clock time by which its server was stopped at the latest (`since` + its
    drain's `wait_s` + its stop's `grace_s`): past it, the notice only says "stopped"."""
    known: bool = True
    """Whether its writer's life is known here (a process of this machine): when not, the
    notice holds until `ends` (and OVERDUE_S) at most, whatever the other servers do."""
    node: str | None = None
    """The node it names (a batch job's server); None: a server of this machine."""


@dataclass(frozen=True)
class Notices:
    """What the folder says now: the ports of this machine's servers draining (`notices`:
    what each notice says), the nodes' (`on_nodes`: by node and port), a line per file
    that is not a notice, or one whose writer is gone (path, why), and one per notice held
    for its link writer's reconnect (`held`)."""

    ports: frozenset[int]
    bad: tuple[tuple[str, str], ...] = ()
    notices: Mapping[int, Notice] = field(default_factory=dict)
    on_nodes: Mapping[tuple[str, int], Notice] = field(default_factory=dict)
    held: tuple[tuple[str, str], ...] = ()
    """Notices honoured for now though their link writer is gone (path, why): LINK_HOLD_S."""

    def of(self, keys: Iterable[tuple[str | None, int]]) -> Notice | None:
        """The notice of the first of `keys` (node, port; node None: this machine's) that
        has one."""
        for node, port in keys:
            notice = self.notices.get(port) if node is None else self.on_nodes.get((node, port))
            if notice is not None:
                return notice
        return None


def _number(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value) if math.isfinite(value) else default


def _writer_of_here(writer: object, here: str) -> int | None:
    """The pid of the notice's writer when it is a process of this machine (`here`: its
    host name); None when it is another machine's, or names none (its life not known)."""
    if not isinstance(writer, dict) or writer.get("host") != here:
        return None
    pid = writer.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    return pid


def _writer_gone(writer: dict[str, object], pid: int) -> bool:
    """Whether the notice's `writer`, process `pid` of this machine, is gone (or its pid
    now another process's)."""
    started = writer.get("started")
    now = process_start(pid)
    if now is None:
        return True
    return isinstance(started, int | float) and abs(now - started) > 1.0


LapseKey = tuple[str, int, object]
"""A notice whose writer was seen gone: (its path, the writer's pid, its start)."""


def _notice_of(
    path: Path,
    port: int,
    node: str | None,
    here: str,
    lapsed: Mapping[LapseKey, float] | None = None,
    seen: dict[LapseKey, float] | None = None,
    now: float = 0.0,
) -> Notice | str | tuple[Notice, str]:
    """The notice in the file at `path` (named for `port`, and `node`), or why it is not
    one; with `lapsed` (the reader's memory: when each notice's writer was first seen gone,
    by `now`'s clock; what this look saw is noted in `seen`), a link's notice whose writer
    is gone is (the notice, why it holds) for LINK_HOLD_S from that first sight."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_NOTICE_BYTES + 1)
            renewed = os.fstat(handle.fileno()).st_mtime
    except FileNotFoundError:
        return "gone"
    except OSError as exc:
        return f"unreadable ({exc.strerror or type(exc).__name__})"
    if len(raw) > MAX_NOTICE_BYTES:
        return f"larger than {MAX_NOTICE_BYTES} bytes"
    try:
        data = json.loads(raw)
    except ValueError:
        return "not JSON"
    if not isinstance(data, dict) or data.get("port") != port:
        return "not a drain notice (no port, or not the one of its name)"
    if data.get("node") != node:
        return "not a drain notice (its node is not the one of its name)"
    writer = data.get("writer")
    pid = _writer_of_here(writer, here)
    since = _number(data.get("since"), time.time())
    wait = max(_number(data.get("wait_s"), 0.0), 0.0)
    ends = since + wait + max(_number(data.get("grace_s"), 0.0), 0.0)
    notice = Notice(port, since, ends, pid is not None, node)
    if pid is None or not isinstance(writer, dict):
        return notice
    lease = _number(data.get("lease_s"), 0.0)
    if "link" in writer and lease > 0 and time.time() - renewed > lease:
        return (
            f"not renewed by the panel behind its SSH link within its lease ({lease:g} s): "
            "the panel is gone or its link frozen; left behind, not a drain"
        )
    if not _writer_gone(writer, pid):
        return notice
    if "link" not in writer or lapsed is None or seen is None:
        return f"its writer (pid {pid}, this machine's) is gone: left behind, not a drain"
    key = (str(path), pid, writer.get("started"))
    first = seen[key] = lapsed.get(key, now)
    if now - first < LINK_HOLD_S:
        return notice, (
            f"its writer (pid {pid}, this machine's), the SSH session of the panel's link, "
            f"is gone: still honoured {LINK_HOLD_S:g} s for the panel to reconnect and "
            "write it again"
        )
    return (
        f"its writer (pid {pid}, this machine's) is gone: the SSH session of the panel's "
        f"link, not back within {LINK_HOLD_S:g} s; left behind, not a drain"
    )


def read_notices(folder: Path, lapsed: dict[LapseKey, float] | None = None) -> Notices:
    """The notices in `folder` (none when it does not exist). `lapsed` is the reader's
    memory across looks (when each notice's link writer was first seen gone: see
    LINK_HOLD_S; kept to the notices still there); without it such a notice is dropped at
    once, as a dead writer's."""
    found: dict[int, Notice] = {}
    on_nodes: dict[tuple[str, int], Notice] = {}
    bad: list[tuple[str, str]] = []
    held: list[tuple[str, str]] = []
    try:
        names = sorted(entry.name for entry in os.scandir(folder))[:MAX_NOTICES]
    except OSError:
        return Notices(frozenset())
    here = socket.gethostname()
    now = time.monotonic()
    seen: dict[LapseKey, float] = {}
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue  # a notice being written (.notice.*), or someone else's file
        port, node = int(match.group(1)), match.group(2)
        said = _notice_of(folder / name, port, node, here, lapsed, seen, now)
        if isinstance(said, tuple):
            said, why = said
            held.append((str(folder / name), why))
        if isinstance(said, Notice):
            if node is None:
                found[port] = said
            else:
                on_nodes[(node, port)] = said
        elif said != "gone":
            bad.append((str(folder / name), said))
    if lapsed is not None:  # kept to the notices that still name a gone link writer
        lapsed.clear()
        lapsed.update(seen)
    return Notices(frozenset(found), tuple(bad), found, on_nodes, tuple(held))


def this_machine() -> set[str]:
    """The host names a URL to a server on this machine may use."""
    names = set(LOCAL_HOSTS)
    try:
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return names


def notice_keys(url: str, local: set[str]) -> list[tuple[str | None, int]]:
    """The notices that may speak of the server at `url`, as (node, port): this machine's
    `PORT.json` and a node's `PORT@NAME.json` under each of its own names when its host is
    this machine; `PORT@HOST.json` for a server of another machine reached on an explicit
    port (a batch job's, `http://NODE:PORT`); none for the rest (an API's `https://...`)."""
    port = local_port(url, local)
    if port is not None:
        names = sorted(name for name in local - LOCAL_HOSTS if _NODE.match(name))
        return [(None, port), *((name, port) for name in names)]
    try:
        parts = urlsplit(url)
        explicit = parts.port
    except ValueError:
        return []
    node = notice_node(url)
    return [(node, explicit)] if node is not None and explicit is not None else []


def local_port(url: str, local: set[str]) -> int | None:
    """The port of `url` when its host is this machine (one of `local`); None otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if not host or (host not in local and not host.startswith("127.")):
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return port
