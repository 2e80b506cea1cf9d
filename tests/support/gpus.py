"""A stand-in `nvidia-smi` for boxes without GPUs (CI): a script on PATH that answers the
watcher's query with fixed rows, the way the real one words them (`[N/A]` included)."""

from __future__ import annotations

from pathlib import Path

ROWS = [
    "0, NVIDIA H100 80GB HBM3, 97, 75321, 81559, 612.40, 71",
    "1, NVIDIA H100 80GB HBM3, 3, 1024, 81559, [N/A], 35",
]
"""index, name, utilization.gpu, memory.used, memory.total, power.draw, temperature.gpu"""


def write_nvidia_smi(folder: Path, rows: list[str] = ROWS, *, exit_code: int = 0) -> Path:
    """An executable `nvidia-smi` in `folder` printing `rows`; returns `folder` (for PATH).
    It checks it was asked the watcher's query, so a changed query fails loudly."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    body = "\n".join(rows)
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--query-gpu=index,name,utilization.gpu,memory.used,memory.total,'
        "power.draw,temperature.gpu*--format=csv,noheader,nounits*) ;;\n"
        '  *) echo "unexpected arguments: $*" >&2; exit 9 ;;\nesac\n'
        f"cat <<'ROWS'\n{body}\nROWS\n"
        f"exit {exit_code}\n"
    )
    script.chmod(0o755)
    return folder
