"""Which folders are safe for our files and our code, when other users share the box.

One rule, used for every folder gen-tui writes in or runs code from: a folder someone else
may write in lets them plant names (links to our files, a `json.py` imported first), and a
folder above it that someone else may rename entries in lets them put another folder at its
path after any check. Root and we may own them; a sticky folder (/tmp) keeps each user's
names their own, so it is safe above, never as the folder itself.
"""

from __future__ import annotations

import glob
import os
import re
import typing

from .files import _S_IFMT, _kind, foreign_link, lineage, linked_by_another

SCRIPT_ENDINGS = (".py", ".sh", ".bash", ".pl", ".rb", ".js")
"""Words of a command line taken for scripts it runs (`python3 x.py`, `bash run.sh`)."""
_INTERPRETER = re.compile(r"([a-zA-Z]+?)[0-9.]*")
_CODE_IN_A_WORD = {
    "python": ("-m", "-c"),
    "pypy": ("-m", "-c"),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "Rscript": ("-e",),
}
for _shell in ("sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh"):
    _CODE_IN_A_WORD[_shell] = ("-c",)
"""Interpreters, by name without version, and the options that make them run code from a
module or a word instead of a script. Otherwise their first word that is not an option is
the script they run, whatever its name ends with (`perl gen`, `bash -e ./launch`)."""
_S_IFDIR = 0o040000


def _writers(mode: int, sticky_ok: bool) -> str | None:
    """Who besides the owner may create or rename names in a folder of `mode`: "others",
    "its group", or None. With `sticky_ok`, the sticky bit makes them harmless (they may
    add names, not move ours)."""
    if not mode & 0o022 or (sticky_ok and mode & 0o1000):
        return None
    return "others" if mode & 0o002 else "its group"


def folder_problem(path: str) -> str | None:
    """Why `path` is no safe folder for our files, in one line (None: it is one).

    Safe means a folder of ours that nobody else can write in: not owned by another user,
    not writable by group or others (a sticky /tmp-like folder included, since anyone may
    create names in it), and not a symlink somebody else made. Anyone who could write in it
    could plant links that make us write, read or disclose their choice of our files.
    """
    uid = os.geteuid()
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as exc:
        return "cannot use %s (%s)" % (path, exc.strerror)
    if linked_by_another(link):
        return "refusing %s: it is a symlink made by uid %d, not by you (uid %d)" % (
            path,
            link.st_uid,
            uid,
        )
    if st.st_mode & _S_IFMT != _S_IFDIR:
        return "refusing %s: it is %s, not a folder" % (path, _kind(st.st_mode))
    if st.st_uid != uid:
        return (
            "refusing %s: it is owned by uid %d, not by you (uid %d), so its files could be "
            "links to yours; use a folder of your own" % (path, st.st_uid, uid)
        )
    who = _writers(st.st_mode, sticky_ok=False)
    if who is not None:
        return (
            "refusing %s: it is writable by %s (mode %04o), so anyone could plant links to "
            "your files in it; `chmod go-w` it or use another folder"
            % (path, who, st.st_mode & 0o7777)
        )
    return None


def _unsafe(path: str, st: os.stat_result, sticky_ok: bool) -> str | None:
    """Why someone else controls the names in folder `path` (stat `st`), said as "PATH is
    ...", naming its owner and mode; None when only we (or root) do."""
    me = os.geteuid()
    mode = st.st_mode & 0o7777
    if st.st_uid not in (me, 0):
        return "%s is owned by uid %d (mode %04o), not by you (uid %d)" % (
            path,
            st.st_uid,
            mode,
            me,
        )
    who = _writers(st.st_mode, sticky_ok)
    if who is not None:
        return "%s is writable by %s%s (mode %04o, owner uid %d)" % (
            path,
            who,
            " without the sticky bit" if sticky_ok else "",
            mode,
            st.st_uid,
        )
    return None


def swap_problem(folder: str) -> str | None:
    """Why someone else could put another folder at `folder`'s path, said as "PATH is ..."
    (None: nobody but us and root can).

    Whoever can rename entries in a folder above it (its owner, or anyone when it is group-
    or world-writable without the sticky bit) can move `folder` away after any check and put
    theirs (or a link) in its place. A component of the path that is a link made by someone
    else can be re-pointed the same way.
    """
    me = os.geteuid()
    path = os.path.abspath(folder)
    foreign = foreign_link(path)  # the path as given: its links are someone's
    if foreign:
        return "%s is a symlink made by uid %d, not by you (uid %d)" % (*foreign, me)
    for above in lineage(path):
        try:
            os.lstat(above)
        except FileNotFoundError:
            if above == path:
                break  # made next, in a parent checked here
            return "%s does not exist" % above
        except NotADirectoryError as exc:
            if above == path:
                break  # a file stands where a folder above should be: making it says so
            return "%s cannot be read (%s)" % (above, exc.strerror)
        except OSError as exc:
            return "%s cannot be read (%s)" % (above, exc.strerror)
    above = os.path.realpath(folder)
    while os.path.dirname(above) != above:
        above = os.path.dirname(above)
        try:
            why = _unsafe(above, os.stat(above), sticky_ok=True)
        except OSError as exc:
            return "%s cannot be read (%s)" % (above, exc.strerror)
        if why is not None:
            return why
    return None


def ancestor_problem(folder: str) -> str | None:
    """Why someone else could swap `folder` for another one under us, in one line (None:
    nobody can). Every file in it is opened by its path, so our files would land in a
    folder of their choice: see :func:`swap_problem`."""
    why = swap_problem(folder)
    if why is None:
        return None
    return (
        "refusing %s: %s, who could swap the folder for a link to another folder; use a "
        "folder of your own (or `chmod go-w`, `chmod +t` the one above)" % (folder, why)
    )


def code_folders(argv: list[str], cwd: str | None, environ: typing.Mapping[str, str]) -> list[str]:
    """The folders a start of `argv` in `cwd` (None: ours) with `environ` takes code from,
    besides the system's own: the working folder (first on sys.path for `-m` and `-c`, and
    relative paths), the program's folder (found on PATH as exec would, relative entries
    against `cwd`), each script's folder (a word ending `.py` (sys.path[0]), `.sh`, `.pl`
    ..., and an interpreter's first word that is not an option, whatever its name), each
    PYTHONPATH entry (a relative one is relative to `cwd`), and a virtual environment's
    site-packages."""
    base = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
    found = [base]
    program = argv[0] if argv else ""
    if program and "/" not in program:
        for entry in environ.get("PATH", os.defpath).split(os.pathsep):
            candidate = os.path.join(base, entry or ".", program)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                program = candidate
                break
    scripts = [word for word in argv[1:] if word.endswith(SCRIPT_ENDINGS)]
    named = _INTERPRETER.fullmatch(os.path.basename(program))
    inline = _CODE_IN_A_WORD.get(named.group(1)) if named else None
    if inline is not None:
        for word in argv[1:]:
            if word in inline:
                break
            if not word.startswith("-"):
                scripts.append(word)
                break
    for word in [program, *scripts] if "/" in program else scripts:
        found.append(os.path.dirname(os.path.normpath(os.path.join(base, word))))
    if "/" in program:
        prefix = os.path.dirname(os.path.dirname(os.path.normpath(os.path.join(base, program))))
        if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
            found.extend(sorted(glob.glob(os.path.join(prefix, "lib", "python*", "site-packages"))))
    pythonpath = environ.get("PYTHONPATH")
    if pythonpath:
        found.extend(os.path.normpath(os.path.join(base, e)) for e in pythonpath.split(os.pathsep))
    return list(dict.fromkeys(found))


def code_problem(folders: list[str]) -> str | None:
    """Why another user could change the code in one of `folders`, in one line naming the
    folder, its owner and mode (None: nobody but us and root can).

    Python imports from the script's folder (or the working folder) before the standard
    library, so a `json.py` someone plants there runs with our rights, environment and API
    key; a sticky folder (/tmp) is no safer, since a new name is all it takes. A folder that
    does not exist yet is as safe as the one it would be made in. Above the code,
    :func:`swap_problem`: the code folder could be renamed away and theirs put at its path.
    """
    for folder in folders:
        at = os.path.abspath(folder)
        while not os.path.lexists(at) and os.path.dirname(at) != at:
            at = os.path.dirname(at)
        try:
            why = _unsafe(at, os.stat(at), sticky_ok=False)
        except OSError as exc:
            why = "%s cannot be read (%s)" % (at, exc.strerror)
        why = why or swap_problem(at)
        if why is not None:
            return (
                "refusing to start: %s holds code the command would run, and %s, so another "
                "user could plant a module there or put their folder in its place, and it "
                "would run as you; start it from a folder of your own" % (folder, why)
            )
    return None
