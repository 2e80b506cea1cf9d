"""A run's details and the run list's other-folder mark, as text: everything a process says
is shown safe (no control characters, no line breaks), bounded, and nothing is left out."""

from __future__ import annotations

from gen_tui.app.dialogs.run_detail import detail_fields
from gen_tui.app.dialogs.run_list import FOLDER_CHARS, folder_tail, host_cell
from gen_tui.backends.hosts import RunIdentity, RunProcess


def _run(cmdline: tuple[str, ...], *, cwd: str | None, mine: bool) -> RunProcess:
    identity = RunIdentity("gpu\x1b[2J", 4242, 1_000.0, "boot", cmdline)
    return RunProcess(
        identity=identity,
        datasets=("B1", "B2\nx"),
        state="writing",
        elapsed_s=60.0,
        output_dir="/data/other\x07/out",
        cwd=cwd,
        uid=1001,
        user="alice",
        mine=mine,
    )


def test_details_show_every_field_whole_and_safe() -> None:
    long = "y" * 5000  # past the 2,000 characters other views show of one string
    run = _run(("python3", "gen.py", "--note", long, "\x1b]52;c;eA==\x07"), cwd=None, mine=False)
    fields = {
        key: value for key, _, value in detail_fields(run, ended=True, elsewhere=True, now=1_090.0)
    }
    assert long in fields["command"] and "more characters" not in fields["command"]
    assert all("\x1b" not in v and "\x07" not in v and "\n" not in v for v in fields.values())
    assert fields["cwd"] == "unknown"
    assert fields["output"] == "/data/other\ufffd/out (another folder, not watched here)"
    assert fields["datasets"] == "B1, B2 x"
    assert fields["owner"] == "alice (uid 1001)"  # not ours: no "(you)"
    assert fields["pid"] == "4242 on gpu\ufffd[2J"
    assert fields["state"] == "ended"
    assert fields["started"].endswith("(1m30s ago)")


def test_the_list_marks_another_folder_by_its_end() -> None:
    folder = "/home/alice/projects/" + "p" * 60 + "/out"
    run = _run(("python3",), cwd="/", mine=True)
    run = RunProcess(**{**run.__dict__, "output_dir": folder})
    assert host_cell(run) == run.identity.host  # RunRow.cells makes each cell safe
    cell = host_cell(run, elsewhere=True)
    assert cell.endswith(f" · other folder …{folder[-(FOLDER_CHARS - 1) :]}")
    assert len(folder_tail(folder)) == FOLDER_CHARS
    assert folder_tail("/short/out") == "/short/out"
