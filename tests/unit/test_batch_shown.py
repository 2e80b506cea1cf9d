"""Issue 31 (panel): in a fleet run (a batch lane beside live lanes) hosted by the panel, a
batch's provider id and status reached the panel raw: the progress-file reader cleaned them,
the hosted engine's snapshot did not. The snapshot now carries them through the same rule
(`BatchView.shown`, the one `BatchView.parse` applies), while the lane keeps the raw id it
polls and cancels with."""

from __future__ import annotations

from pathlib import Path

from gen_tui.backends.clients.batch import batch_state
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.dataset_progress import dataset_snapshot
from gen_tui.backends.progress.batches import ID_CHARS, STATUS_CHARS, BatchView, batches_line
from gen_tui.backends.store.progress_file import ProgressFile

T0 = 1_700_000_000.0
# An OSC 52 clipboard write, a title change, a bidi override and 10 KB of padding.
HOSTILE_ID = "batch_\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\u202e" + "x" * 10_000
HOSTILE_STATUS = "in_progress\x1b[2J\x1b[31m" + "y" * 10_000


def hostile_state() -> BatchView:
    return batch_state(
        {
            "id": HOSTILE_ID,
            "status": HOSTILE_STATUS,
            "request_counts": {"total": 10, "completed": 4, "failed": 0},
            "created_at": T0 - 60,
            "metadata": {"gen_tui_key": "k1"},
        }
    )


def clean(text: str) -> bool:
    return not any(c in text for c in "\x1b\x07\u202e") and len(text) < 200


def test_the_hosted_snapshot_carries_a_batch_cleaned_as_the_file_reader_does(
    tmp_path: Path,
) -> None:
    spec = DatasetSpec("B", tmp_path / "B.jsonl")
    config = EngineConfig(
        datasets=[spec], server_urls=["scripted://"], tokenizer="", output_dir=tmp_path,
        sampling={"max_new_tokens": 100},
    )  # fmt: skip
    ds = DatasetRun(spec, tmp_path / "B", 100.0)
    raw = hostile_state()
    ds.batches = (raw,)
    assert raw.id == HOSTILE_ID  # the lane's own copy stays raw: it polls with it

    snap = dataset_snapshot(ds, config, "box", 0.0, now=T0)
    (shown,) = snap.batches
    assert clean(shown.id) and clean(shown.status), (shown.id[:120], shown.status[:120])
    assert shown.id.startswith("batch_") and shown.status.startswith("in_progress")
    assert len(shown.id) <= ID_CHARS + 40 and len(shown.status) <= STATUS_CHARS + 40
    assert type(shown) is BatchView  # no file ids or metadata past the lane
    assert (shown.completed, shown.total, shown.created_at) == (4, 10, T0 - 60)

    # the same words a watched panel reads from the progress.json the raw batch makes
    read = ProgressFile.parse({"batches": [raw.to_json(T0)]})
    assert read is not None and read.batches == (shown,)
    line = batches_line(snap.batches, T0)
    assert not any(c in line for c in "\x1b\x07\u202e"), line
    assert "\x1b" not in str(snap.to_json())
