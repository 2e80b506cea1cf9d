"""Slurm's words a recipe is checked against: the job name a server's job carries and the
time limit sbatch takes.

Why here, under the config: the `[[servers]]` recipes are read and checked with the config
file (a time limit sbatch would refuse, two recipes whose jobs would share a name), and the
Slurm launcher (servers/slurm.py, a layer above) names and finds its jobs with the same
rules; one home below both keeps each rule once without the config importing the servers.
"""

from __future__ import annotations

import re

JOB_PREFIX = "gen-tui:"
"""The start of every job name gen-tui submits: the marker that finds them again."""

NAME_CHARS = 100
"""The most characters of a recipe name kept in a job name (Slurm's own limit is larger)."""

TIME = re.compile(r"(?:\d{1,5}-)?\d{1,6}(?::\d{1,2}){0,2}|UNLIMITED|INFINITE")
"""A time limit as sbatch's --time takes it."""

_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9._-]")


def slurm_time(text: str) -> bool:
    """Whether `text` is a time limit as sbatch's --time takes it."""
    return TIME.fullmatch(text) is not None


def job_name(recipe: str) -> str:
    """The job name of `recipe`'s server: the marker, then the name in characters that no
    shell, squeue column or `scontrol` key=value parse can take for anything else."""
    safe = _NOT_IN_A_NAME.sub("_", recipe)[:NAME_CHARS] or "_"
    return JOB_PREFIX + safe


def recipe_of(name: str) -> str | None:
    """The recipe name in a job name of ours (None: not ours)."""
    if not name.startswith(JOB_PREFIX):
        return None
    rest = name[len(JOB_PREFIX) :]
    return rest if rest and not _NOT_IN_A_NAME.search(rest) else None
