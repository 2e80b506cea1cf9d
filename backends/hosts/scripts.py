"""The POSIX sh scripts a host runs to signal a run and to sample file sizes.

They are the one implementation of "is this still the process we listed?" and of "have its
files stopped growing?": the SSH host runs them on the remote box (where sshd refuses
channel signals for root, so the signal is sent by `kill`), the local host runs them with
`sh -c`. Every value is substituted already quoted.

Over SSH a script travels on stdin to `sh -s`, never inside the command line: the remote
login shell parses the command line first, and a csh/tcsh login shell ends a quoted word at
a newline ("Unmatched '"). For the same reason a value that must go on a remote command line
is refused when it holds a line break or a NUL (:func:`check_remote_word`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.ps import RunIdentity
from gen_tui.backends.untrusted import one_line

# Check a process's identity and that it is the login user's own (never another user's,
# even as root), signal it (its group when it leads one), then wait for it to be gone,
# printing "tick N" every second. A signal the kernel refuses (EPERM) is "denied", not
# "absent": the run is still there.
_SIGNAL_SCRIPT = r"""
p={pid}; want={ticks}; boot={boot}; cmd={cmd}; sig={sig}; wait_cs={wait_cs}
probe() {{
  s=$(cat /proc/$p/stat 2>/dev/null) || {{ echo gone; return; }}
  r=${{s##*') '}}
  set -f; set -- $r; set +f
  case $1 in Z|X|x) echo gone; return;; esac
  if [ "$want" != "-" ] && [ "${{20}}" != "$want" ]; then echo changed; return; fi
  echo "alive $3"
}}
cs() {{ read u rest < /proc/uptime; echo "${{u%.*}}${{u#*.}}"; }}
if [ -n "$boot" ] && [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" != "$boot" ]; then
  echo "refused the machine rebooted since the run was listed"; exit 0
fi
st=$(probe)
case $st in
  gone) echo absent; exit 0;;
  changed) echo "refused pid $p now belongs to another process (other start time)"; exit 0;;
esac
c=$(od -An -v -tx1 /proc/$p/cmdline | tr -d ' \n')
c=${{c%00}}
if [ "$c" != "$cmd" ]; then echo "refused pid $p now runs another command line"; exit 0; fi
o=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' /proc/$p/status 2>/dev/null)
[ -n "$o" ] || {{ echo absent; exit 0; }}
[ "$o" = "$(id -u)" ] || {{ echo "denied $o"; exit 0; }}
pg=${{st#alive }}
if [ "$pg" = "$p" ]; then kill -s $sig -- -$p 2>/dev/null; else kill -s $sig $p 2>/dev/null; fi ||
  {{ case $(probe) in alive*) echo "denied $o";; *) echo absent;; esac; exit 0; }}
echo sent
t0=$(cs); last=0
while :; do
  case $(probe) in alive*) ;; *) echo gone; exit 0;; esac
  now=$(cs)
  [ $((now - t0)) -ge $wait_cs ] && break
  el=$(( (now - t0) / 100 ))
  if [ $el -gt $last ]; then last=$el; echo "tick $el"; fi
  sleep 0.1
done
echo alive
"""

_SIZES_SCRIPT = r"""
k=0
while [ $k -lt {samples} ]; do
  for f in {files}; do stat -c %s "$f" 2>/dev/null || echo -; done
  echo --
  k=$((k + 1))
  [ $k -lt {samples} ] && sleep 0.5
done
exit 0
"""
# Lines appended past an offset: `tail -c +N` starts at byte N (1-based), so only what was
# written since is read, however large the file is.
_APPENDED_SCRIPT = r"""
for pair in {pairs}; do
  f=${{pair#*:}}; n=${{pair%%:*}}
  if [ -f "$f" ]; then tail -c +$((n + 1)) "$f" | wc -l; else echo -; fi
done
exit 0
"""

# Owner and mode (octal, special bits included: 1777) of each folder, `-` when it cannot be
# read. -L: a folder named through a link is judged by the folder itself.
SIGNALS = ("TERM", "KILL")
VERDICTS = ("refused", "denied", "absent", "gone", "alive")
"""The signal script's last word: identity changed, another user's (then its uid), gone
before the signal, gone after it, still there once the wait was over."""


def rquote(path: str) -> str:
    """Quote a remote path for sh, keeping a leading `~/` meaning the remote home."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


_NOT_ON_A_COMMAND_LINE = ("\n", "\r", "\0")


def check_remote_word(value: str, what: str) -> str:
    """`value`, if it can be one word of a remote command line; else :class:`RunError`.

    Why: the remote login shell parses that line, and csh/tcsh cannot quote a newline (the
    command breaks or runs as two), while a NUL cannot pass at all. A path or pattern with
    one is refused, naming it, before anything reaches the host.
    """
    if any(char in value for char in _NOT_ON_A_COMMAND_LINE):
        raise RunError(
            f"{what} {one_line(repr(value), 200)} holds a line break or NUL: refused, it "
            "cannot go on a remote command line (a csh/tcsh login shell would break it)"
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a command line's bytes that are not UTF-8
            raise RunError(
                f"{what} {one_line(value, 200)} holds bytes that are not UTF-8: refused, "
                "a remote command line is sent as UTF-8 and would not be the same bytes"
            ) from None
    return value


def remote_quote(value: str, what: str = "the value") -> str:
    """One word of a remote command line, read alike by sh, bash, csh and tcsh.

    `shlex.quote`, with each `!` taken out of the quotes as `\\!`: csh expands history even
    inside single quotes (`'a!b'` fails with "Event not found"), and `\\!` outside quotes is
    a plain `!` to every shell. A line break or NUL is refused (:func:`check_remote_word`).
    """
    return shlex.quote(check_remote_word(value, what)).replace("!", "'\\!'")


def sh_command(*args: str) -> str:
    """The command line that runs a POSIX sh script sent on stdin, whatever the login shell.

    `args` become the script's positional parameters (`$1`...), each quoted by
    :func:`remote_quote`.
    """
    words = [remote_quote(arg, "an argument") for arg in args]
    return " ".join(["sh", "-s", *(["--", *words] if words else [])])


def signal_script(identity: RunIdentity, sig: str, wait_s: float) -> str:
    """Check the identity, send SIG`sig`, then wait up to `wait_s` for the process to go.

    It prints `tick N` each second and ends with one of :data:`VERDICTS` (then a detail).
    """
    if sig not in SIGNALS:
        raise ValueError(f"unsupported signal {sig}")
    return _SIGNAL_SCRIPT.format(
        pid=int(identity.pid),
        ticks=shlex.quote(str(identity.start_ticks) if identity.start_ticks else "-"),
        boot=shlex.quote(identity.boot_id),
        cmd=shlex.quote(identity.cmdline_hex()),
        sig=sig,
        wait_cs=max(0, round(wait_s * 100)),
    )


def sizes_script(paths: Sequence[str], samples: int = 3) -> str:
    """Print the sizes of `paths` (`-` for a missing one) `samples` times, 0.5 s apart."""
    return _SIZES_SCRIPT.format(files=" ".join(rquote(p) for p in paths), samples=int(samples))


def appended_script(offsets: Mapping[str, int]) -> str:
    """Print, per path, how many lines were appended past its offset (`-`: missing)."""
    # One word per file: "N:" then the quoted path ("123:"'/a b' is the word 123:/a b).
    pairs = " ".join(f"{int(offset)}:" + rquote(path) for path, offset in offsets.items())
    return _APPENDED_SCRIPT.format(pairs=pairs)


def parse_appended(output: str) -> int | None:
    """The total of :func:`appended_script`'s counts, or None if any file was missing."""
    total = 0
    for line in output.split():
        if not line.isdigit():
            return None
        total += int(line)
    return total


def parse_sizes(output: str, paths: Sequence[str]) -> list[dict[str, int | None]]:
    """The samples :func:`sizes_script` printed, each a size (None: missing) per path."""
    samples: list[dict[str, int | None]] = []
    current: list[int | None] = []
    for line in output.splitlines():
        if line == "--":
            samples.append(dict(zip(paths, current, strict=False)))
            current = []
        else:
            current.append(int(line) if line.isdigit() else None)
    return samples
