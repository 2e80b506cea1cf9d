"""The names of a dataset folder's files and how big its small files may be.

Why a module of its own: these are the portable half of the on-disk contract. The engine,
the record scan, the exporter and every host read them from here (through the package), and
the watcher that ships to a GPU box carries the same text, so a file name or a size bound
can never differ between the writer and the reader on another machine.
"""

from __future__ import annotations

import re

# A dataset folder's files: gen-tui's and every client's one definition of them.
RAW_FILE = "raw_responses.jsonl"
ERRORS_FILE = "errors.jsonl"
PROGRESS_FILE = "progress.json"
LOCK_FILE = "run.lock"
MANIFEST_FILE = "run_manifest.json"  # what the run was run with: prompts, template, sampling
HISTORY_FILE = "history.jsonl"  # a point every few seconds of every run, compacted (history.py)
LOG_DIR = ".gen-tui-logs"  # starts with '.', so it can never be taken for a dataset folder
START_SEQ = "start.seq"
START_LOCK = "start.lock"

# The most a small file of a dataset folder may hold: anyone who can write in a shared box's
# folder can make one huge, and the watcher's report line must stay well under a client's
# line limit (asyncio's readline stops at 64 KiB). A real progress.json is a few KiB.
PROGRESS_MAX_BYTES = 32 << 10
HOLDER_MAX_BYTES = 16 << 10
SEQ_MAX_BYTES = 64
# The deepest nesting a progress.json or run.lock may have: a client parses what we forward
# with a recursive parser (a real file nests 4 deep).
MAX_DEPTH = 32

# The longest line that can be a record: far beyond the longest the engine writes (an answer
# is bounded by 16 bytes a token of max_new_tokens, eight times over, plus 4 MiB; its ids
# take about as much). A longer line is no record: the engine's scan and the watcher read
# past it by its offset, never holding it (a file without newlines, copied in or planted by
# another user, must not take the memory). One bound, so both count a file alike.
RECORD_MAX_BYTES = 256 << 20

# \Z, not $: "$" also matches before a final newline, and "B1\n" is no safe name.
DATASET_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
