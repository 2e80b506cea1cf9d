"""`run_manifest.json`: what a dataset's records were generated with.

Export rebuilds each record's prompt ids with the run's own tokenizer and chat template,
from the run's own prompt file. The manifest records those (paths and sha256 hashes), so
the user need not repeat them, and so export can refuse when either changed since: ids
rebuilt from an edited file or template would no longer be what the server answered.

One manifest per dataset folder, written by the engine as it opens the folder. A resume
with the same setup leaves it as it is. A resume with a different one (another prompt
file, template, tokenizer, sampling, API or model) over records already written appends a
second entry to `runs`: the file then mixes setups, and export refuses it rather than
labelling some records with the wrong prompt ids. Over an empty record file the new setup
replaces the old, since no record came from it. No secrets: keys never reach a setup, and
server URLs are kept without user info or query.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from gen_tui.backends.store.prompts import open_prompt_file
from gen_tui.backends.store.records import write_json_atomic
from gen_tui.backends.watcher import MANIFEST_FILE, BadFile, quoted, read_small

MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 1 << 20
"""A manifest is a few hundred bytes a run; a bigger file is not ours to read whole."""
_HASH_CHUNK = 1 << 20


class ManifestError(Exception):
    """A manifest that is missing, unreadable or says the records cannot be exported."""


def file_sha256(path: Path) -> str:
    """sha256 of a file's content, read in chunks (prompt files run to gigabytes)."""
    digest = hashlib.sha256()
    with open_prompt_file(path) as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def template_sha256(tokenizer: Any) -> str | None:
    """sha256 of a tokenizer's chat template (a string, or a dict of named templates)."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if template is None:
        return None
    if not isinstance(template, str):
        template = orjson.dumps(template, option=orjson.OPT_SORT_KEYS).decode()
    return hashlib.sha256(template.encode()).hexdigest()


def public_url(url: str) -> str:
    """`url` without user info, query or fragment: what a manifest may say of a server."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class RunSetup:
    """What decides a record's prompt ids and answer, as one run of a dataset had it."""

    prompts: str
    prompts_sha256: str
    tokenizer: str
    chat_template_sha256: str | None
    sampling: dict[str, Any]
    api: str
    model: str | None
    servers: list[str] = field(default_factory=list)

    @classmethod
    def from_payload(cls, payload: Any, where: str) -> RunSetup:
        if not isinstance(payload, dict):
            raise ManifestError(f"{where}: a run entry is not an object")
        try:
            values = {name: payload[name] for name in cls.__dataclass_fields__}
        except KeyError as exc:
            raise ManifestError(f"{where}: a run entry lacks field {exc.args[0]!r}") from None
        for name, value in values.items():
            kind, test = _FIELD_TYPES[name]
            if not test(value):
                raise ManifestError(
                    f"{where}: field {name!r} of a run entry must be {kind}, got {quoted(value)}"
                )
        return cls(**values)

    def lanes(self) -> str:
        """Its servers as a refusal names them: a mixed fleet's lane names (`lanes box,
        api`), else the URLs (`server http://...`)."""
        names = [entry.split("=", 1)[0] if ",api=" in entry else entry for entry in self.servers]
        if not names:
            return "an unnamed server"
        kind = ("lane" if self.fleet else "server") + ("s" if len(names) > 1 else "")
        return f"{kind} {', '.join(names)}"

    @property
    def fleet(self) -> bool:
        """Whether it was a mixed fleet's run (`--lane`): each of its records names its API."""
        return any(",api=" in entry for entry in self.servers)

    def differences(self, other: RunSetup) -> list[str]:
        """The fields in which `other` differs from this setup, servers aside: the same
        model behind another URL (a moved server, a router) makes the same records."""
        return [
            name
            for name in self.__dataclass_fields__
            if name != "servers" and getattr(self, name) != getattr(other, name)
        ]


def native_ids(record: Any, run_api: str | None) -> bool:
    """Whether `record`'s ids are its server's own (SGLang's native API counted them, so
    their length must equal its token counts). Over a mixed fleet the record names its
    lane's API and that decides (the run's is `openai+sglang`); otherwise the run's API
    (None: the run is unknown, and the ids are checked as the server's)."""
    api = record.get("api") if isinstance(record, dict) else None
    if isinstance(api, str):
        return api == "sglang"
    return run_api is None or run_api == "sglang"


def _text(value: Any) -> bool:
    return isinstance(value, str)


_FIELD_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    # Checked as read: the file may be another script's, or planted, and a list where a
    # path is named crashed verify and export (unhashable) and the engine's next start.
    "prompts": ("a string", _text),
    "prompts_sha256": ("a string", _text),
    "tokenizer": ("a string", _text),
    "chat_template_sha256": ("a string or null", lambda v: v is None or _text(v)),
    "sampling": ("an object", lambda v: isinstance(v, dict)),
    "api": ("a string", _text),
    "model": ("a string or null", lambda v: v is None or _text(v)),
    "servers": ("a list of strings", lambda v: isinstance(v, list) and all(map(_text, v))),
}


@dataclass
class Manifest:
    dataset: str
    runs: list[dict[str, Any]]
    path: Path

    @property
    def setups(self) -> list[RunSetup]:
        return [RunSetup.from_payload(run, str(self.path)) for run in self.runs]

    def single_setup(self) -> RunSetup:
        """The one setup every record came from; ManifestError (one line) if they are mixed."""
        setups = self.setups
        if not setups:
            raise ManifestError(f"{self.path}: lists no run")
        first = setups[0]
        for later in setups[1:]:
            changed = first.differences(later)
            if later.fleet:
                # A mixed fleet's records each name their lane's API, and those without one
                # are the earlier run's (its manifest's `api`): a box-only run resumed as a
                # fleet (`sglang`, then `openai+sglang`) is one setup by every other field.
                changed = [name for name in changed if name != "api"]
            if changed:
                raise ManifestError(
                    f"{self.path}: the records come from runs with different "
                    f"{', '.join(changed)} ({first.lanes()} and {later.lanes()}: a resume "
                    "changed them); export one setup's records at a time by moving the "
                    "others out of the dataset folder"
                )
        return first


def read_manifest(folder: Path) -> Manifest:
    """The manifest of a dataset folder, or ManifestError naming the file and what is wrong."""
    path = folder / MANIFEST_FILE
    try:  # a regular file only: a FIFO planted by that name would hang a plain open
        data = read_small(os.fspath(path), MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise ManifestError(
            f"{path} does not exist: the records were written by another script or an "
            "older gen-tui; start the same gen-tui run once more to write it (a dataset "
            "already at its budget does nothing else)"
        ) from None
    except BadFile as exc:  # its message starts with the file's name
        raise ManifestError(str(folder / str(exc))) from None
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(payload, dict) or payload.get("version") != MANIFEST_VERSION:
        raise ManifestError(f"{path}: not a version {MANIFEST_VERSION} manifest")
    runs = payload.get("runs")
    if not isinstance(runs, list):
        raise ManifestError(f"{path}: field 'runs' must be a list")
    return Manifest(dataset=str(payload.get("dataset", folder.name)), runs=runs, path=path)


def record_setup(folder: Path, dataset: str, setup: RunSetup, records: int) -> None:
    """Note `setup` in the folder's manifest as a run opens it (`records` already there)."""
    entry: dict[str, Any] = {
        **asdict(setup),
        "started": round(time.time(), 3),
        "first_record": records,
    }
    if records:
        # Records older than any manifest (an older gen-tui, the seed script): assumed to
        # come from this setup, and said so. Export still checks every record's prompt
        # length against the ids it rebuilds, which a different template or file fails.
        entry["assumed_for_earlier_records"] = True
    runs: list[dict[str, Any]] = []
    if os.path.lexists(folder / MANIFEST_FILE):
        try:
            manifest = read_manifest(folder)
            setups = manifest.setups
        except ManifestError:
            setups = []  # unreadable: start it again, saying nothing of the old records
            manifest = None
        if manifest is not None and setups and records:
            runs = manifest.runs
            if not setups[-1].differences(setup):
                known = runs[-1]["servers"]
                new = [url for url in setup.servers if url not in known]
                if not new:
                    return
                runs[-1]["servers"] = [*known, *new]
                _write(folder, dataset, runs)
                return
            entry.pop("assumed_for_earlier_records")
    _write(folder, dataset, [*runs, entry])


def _write(folder: Path, dataset: str, runs: list[dict[str, Any]]) -> None:
    payload = {"version": MANIFEST_VERSION, "dataset": dataset, "runs": runs}
    write_json_atomic(folder / MANIFEST_FILE, payload)
