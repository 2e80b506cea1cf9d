"""Slurm's answers are untrusted text, and the sbatch line is built from a user's recipe
(backends/servers/slurm.py): odd output is named in one line, never a traceback, and every
word of the job's command reaches its shell quoted."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import pytest

from gen_tui.backends.servers.slurm import (
    MAX_LINES,
    BatchSpec,
    JobStatus,
    SlurmError,
    SlurmJobs,
    job_command,
    job_name,
    parse_listing,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
    parse_submitted,
    recipe_of,
    sbatch_argv,
)

SPEC = BatchSpec(name="sg-0", argv=["python", "-m", "sglang.launch_server"], log="/l/sg-0.log")


def spec(**changes: object) -> BatchSpec:
    return BatchSpec(**{**SPEC.__dict__, **changes})  # type: ignore[arg-type]


# --- the sbatch line ------------------------------------------------------------------------


def test_the_sbatch_line_holds_each_option_as_one_word() -> None:
    argv = sbatch_argv(spec(partition="gpu", gpus=8, time="4:00:00", workdir="/w d"))
    assert argv[:-1] == [
        "sbatch",
        "--parsable",
        "--job-name=gen-tui:sg-0",
        "--output=/l/sg-0.log",
        "--nodes=1",
        "--ntasks=1",
        "--partition=gpu",
        "--gres=gpu:8",
        "--time=4:00:00",
        "--chdir=/w d",
    ]
    assert argv[-1] == "--wrap=exec env python -m sglang.launch_server"


def test_the_job_command_is_the_recipe_word_for_word_in_sh() -> None:
    hostile = ["$(reboot)", "`id`", "a'b", 'c"d', "e;f", "g h", "*", "~", "", "$HOME"]
    line = job_command(spec(argv=["srv", *hostile], env={"CUDA_VISIBLE_DEVICES": "0,1", "X": "$Y"}))
    # shlex.split reads a line as POSIX sh does: each word comes back as it was.
    assert shlex.split(line) == ["exec", "env", "CUDA_VISIBLE_DEVICES=0,1", "X=$Y", "srv", *hostile]


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"argv": []}, "server sg-0: the command is empty"),
        ({"argv": ["A=1", "srv"]}, "server sg-0: the command's first word 'A=1' holds `=`"),
        ({"argv": ["srv", "a\nb"]}, "server sg-0: argument 'a\\nb' holds a line break or NUL"),
        ({"env": {"1X": "v"}}, "server sg-0: environment name '1X' is not a variable name"),
        ({"env": {"X": "a\rb"}}, "server sg-0: environment X 'a\\rb' holds a line break"),
        ({"log": "logs/x.log"}, "server sg-0: log file logs/x.log is not absolute"),
        ({"log": "/l/%j.log"}, "server sg-0: log file /l/%j.log holds % or \\"),
        ({"partition": ""}, "server sg-0: the partition is empty"),
        ({"partition": "gpu\n--wrap=x"}, "server sg-0: partition 'gpu\\n--wrap=x' holds a line"),
        ({"gpus": -1}, "server sg-0: gpus must not be negative, got -1"),
        ({"time": "4h"}, "server sg-0: time '4h' is not a Slurm time limit"),
        ({"workdir": "/a\0b"}, "server sg-0: working folder '/a\\x00b' holds a line break"),
    ],
)
def test_a_recipe_that_cannot_be_a_job_is_one_line(changes: dict[str, object], said: str) -> None:
    with pytest.raises(SlurmError) as caught:
        sbatch_argv(spec(**changes))
    assert str(caught.value).startswith(said)
    assert "\n" not in str(caught.value)


def test_a_hostile_recipe_name_is_shown_inert() -> None:
    with pytest.raises(SlurmError) as caught:
        sbatch_argv(spec(name="evil\x1b]52;c;eA==\x07\nline", argv=[]))
    assert "\x1b" not in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("time", ["90", "4:00:00", "2-00:00:00", "1-12", "30:00", "UNLIMITED"])
def test_slurm_time_spellings_pass(time: str) -> None:
    assert f"--time={time}" in sbatch_argv(spec(time=time))


def test_a_job_name_is_the_marker_and_a_name_no_parser_misreads() -> None:
    assert job_name("sg-0") == "gen-tui:sg-0"
    assert job_name("a b|c JobState=X") == "gen-tui:a_b_c_JobState_X"
    assert job_name("") == "gen-tui:_"
    assert len(job_name("x" * 500)) == len("gen-tui:") + 100
    assert recipe_of("gen-tui:sg-0") == "sg-0"
    assert recipe_of("sg-0") is None
    assert recipe_of("gen-tui:") is None
    assert recipe_of("gen-tui:a b") is None


# --- what Slurm prints --------------------------------------------------------------------


def test_sbatch_parsable_gives_the_id_with_or_without_a_cluster() -> None:
    assert parse_submitted("1234\n") == "1234"
    assert parse_submitted("1234;big-cluster\n") == "1234"


@pytest.mark.parametrize(
    "out", ["", "Submitted batch job 12\n", "12\n13\n", "1;a b", "\x1b]52;c;x\x07"]
)
def test_sbatch_output_without_one_id_is_one_line(out: str) -> None:
    with pytest.raises(SlurmError) as caught:
        parse_submitted(out)
    message = str(caught.value)
    assert message.startswith("sbatch --parsable printed no job id: ")
    assert "\n" not in message and "\x1b" not in message


def test_squeue_states_and_nodes() -> None:
    assert parse_squeue("7", "RUNNING gpu-node[01]\n") == JobStatus("7", "RUNNING", "gpu-node[01]")
    assert parse_squeue("7", "PENDING \n") == JobStatus("7", "PENDING", None)
    assert parse_squeue("7", "PENDING (null)\n") == JobStatus("7", "PENDING", None)
    assert parse_squeue("7", "") is None
    cancelled = parse_squeue("7", "CANCELLED n1")
    assert cancelled is not None and cancelled.ended and not cancelled.running


@pytest.mark.parametrize(
    "out",
    [
        "RUNNING n1\nRUNNING n2\n",  # two jobs for one id
        "running n1",  # not Slurm's spelling
        "RUNNING n1 extra",
        "RUNNING \x1b[2Jn1",
        "X" * 5000,
    ],
)
def test_odd_squeue_output_is_one_line_naming_the_job(out: str) -> None:
    with pytest.raises(SlurmError) as caught:
        parse_squeue("7", out)
    message = str(caught.value)
    assert message.startswith("job 7: squeue said something unreadable: ")
    assert "\n" not in message and "\x1b" not in message and len(message) < 400


def test_sacct_gives_the_jobs_state_and_its_commands_exit() -> None:
    # sacct's own lines for a cancelled server: the job's line has 0:0, the batch step's
    # the signal that ended the server.
    out = "18|CANCELLED by 0|0:0|vm\n18.batch|CANCELLED|0:15|vm\n18.extern|COMPLETED|0:0|vm\n"
    assert parse_sacct("18", out) == JobStatus(
        "18", "CANCELLED", "vm", exit_code=0, signal=15, source="sacct"
    )
    # No batch line (the job never started): the job's own exit.
    assert parse_sacct("7", "7|FAILED|1:0|None assigned\n") == JobStatus(
        "7", "FAILED", None, exit_code=1, signal=0, source="sacct"
    )
    running = parse_sacct("7", "7|RUNNING|0:0|n1\n7.batch|RUNNING|0:0|n1\n")
    assert running is not None and running.running and running.exit_code is None
    assert parse_sacct("7", "\n") is None
    assert parse_sacct("7", "7.batch|FAILED|0:9|n1\n") is None  # no line of the job itself


@pytest.mark.parametrize(
    "out",
    [
        "7|FAILED|3:0",  # a field short
        "7|FAILED|x:y|n1",
        "7|failed|0:0|n1",
        "7|FAILED|0:0|n 1",
        "8|FAILED|0:0|n1",  # another job's line
        "7|FAILED|0:0|n1|extra",
    ],
)
def test_odd_sacct_output_is_one_line(out: str) -> None:
    with pytest.raises(SlurmError, match=r"^job 7: sacct said something unreadable: "):
        parse_sacct("7", out)


def test_scontrol_gives_the_state_the_first_keys_say() -> None:
    line = (
        "JobId=7 JobName=gen-tui:sg-0 UserId=root(0) JobState=CANCELLED Reason=None "
        "ExitCode=0:15 ReqNodeList=(null) NodeList=vm Command=/x JobState=RUNNING"
    )
    assert parse_scontrol("7", line) == JobStatus(
        "7", "CANCELLED", "vm", exit_code=0, signal=15, source="scontrol"
    )
    # A running job's ExitCode is not its end yet.
    running = parse_scontrol("7", "JobId=7 JobState=RUNNING ExitCode=0:0 NodeList=vm")
    assert running is not None and running.exit_code is None and running.running
    assert parse_scontrol("7", "") is None


def test_odd_scontrol_output_is_one_line() -> None:
    with pytest.raises(SlurmError, match=r"^job 7: scontrol show job said something unreadable"):
        parse_scontrol("7", "JobId=7 Reason=None")


def test_the_listing_keeps_ours_skips_others_and_names_odd_lines() -> None:
    out = "\n".join(
        [
            "11|RUNNING|n1|gen-tui:sg-0",
            "12|PENDING||gen-tui:sg-1",
            "13|RUNNING|n2|someone-elses-job",
            "14|RUNNING|n3|gen-tui:a b",  # not a name job_name writes
            "garbage \x1b[31m",
            "15|RUNNING|n4|name|with|bars",
        ]
    )
    listing = parse_listing(out)
    assert [(j.job_id, j.recipe, j.state, j.node) for j in listing.jobs] == [
        ("11", "sg-0", "RUNNING", "n1"),
        ("12", "sg-1", "PENDING", None),
    ]
    assert listing.odd is not None
    assert listing.odd.startswith("squeue: 2 unreadable lines skipped, the first: '14|RUNNING")
    assert "\n" not in listing.odd and "\x1b" not in listing.odd


def test_a_huge_listing_is_read_within_bounds() -> None:
    out = "1|RUNNING|n|gen-tui:x\n" * (MAX_LINES + 5)
    listing = parse_listing(out)
    assert len(listing.jobs) == MAX_LINES
    assert listing.odd == "squeue: 5 more lines not read"


# --- the class over a runner ---------------------------------------------------------------


class Scripted:
    """A runner that answers each command from a table, and records what it was asked."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.asked: list[list[str]] = []

    async def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.asked.append(list(argv))
        return self.answers.get(argv[0], (1, "", f"{argv[0]}: not scripted"))


async def test_an_ended_job_the_controller_holds_is_read_from_its_record() -> None:
    run = Scripted(
        {
            "squeue": (0, "FAILED n1\n", ""),
            "scontrol": (0, "JobId=9 JobState=FAILED ExitCode=0:9 NodeList=n1", ""),
        }
    )
    status = await SlurmJobs(run).status("9")
    assert status == JobStatus("9", "FAILED", "n1", exit_code=0, signal=9, source="scontrol")
    assert [argv[0] for argv in run.asked] == ["squeue", "scontrol"]


async def test_a_lagging_accounting_does_not_bring_an_ended_job_back() -> None:
    # The controller says CANCELLED but cannot show the record; sacct still says RUNNING.
    run = Scripted(
        {
            "squeue": (0, "CANCELLED n1\n", ""),
            "scontrol": (1, "", "slurm_load_jobs error: Invalid job id specified"),
            "sacct": (0, "9|RUNNING|0:0|n1\n", ""),
        }
    )
    assert await SlurmJobs(run).status("9") == JobStatus("9", "CANCELLED", "n1")


async def test_a_job_the_controller_forgot_is_read_from_the_accounting() -> None:
    run = Scripted(
        {
            "squeue": (1, "", "slurm_load_jobs error: Invalid job id specified"),
            "sacct": (0, "9|TIMEOUT|0:0|n1\n9.batch|CANCELLED|0:15|n1\n", ""),
        }
    )
    status = await SlurmJobs(run).status("9")
    assert status == JobStatus("9", "TIMEOUT", "n1", exit_code=0, signal=15, source="sacct")
    assert [argv[0] for argv in run.asked] == ["squeue", "sacct"]


async def test_a_running_job_asks_squeue_alone() -> None:
    run = Scripted({"squeue": (0, "RUNNING n1\n", "")})
    assert await SlurmJobs(run).status("9") == JobStatus("9", "RUNNING", "n1")
    assert len(run.asked) == 1


async def test_a_job_no_command_knows_is_none() -> None:
    # squeue and scontrol do not hold it, and sacct fails (no accounting on this cluster).
    run = Scripted(
        {
            "squeue": (1, "", "slurm_load_jobs error: Invalid job id specified"),
            "sacct": (1, "", "Slurm accounting storage is disabled"),
        }
    )
    assert await SlurmJobs(run).status("9") is None


async def test_a_controller_that_does_not_answer_is_not_a_job_gone() -> None:
    # None would tell the launcher the job is gone, and it would submit a second server.
    run = Scripted({"squeue": (1, "", "squeue: error: Unable to contact slurm controller")})
    with pytest.raises(SlurmError) as caught:
        await SlurmJobs(run).status("9")
    assert str(caught.value) == (
        "job 9: squeue failed: squeue: error: Unable to contact slurm controller"
    )


async def test_a_job_id_from_elsewhere_is_checked_before_any_command() -> None:
    run = Scripted({})
    with pytest.raises(SlurmError, match=r"^not a Slurm job id: '9; rm -rf /'$"):
        await SlurmJobs(run).status("9; rm -rf /")
    with pytest.raises(SlurmError, match=r"^not a Slurm job id"):
        await SlurmJobs(run).cancel("-1")
    assert run.asked == []


async def test_a_refused_submit_is_one_line_with_slurms_words() -> None:
    said = (
        "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    run = Scripted({"sbatch": (1, "", said)})
    with pytest.raises(SlurmError) as caught:
        await SlurmJobs(run).submit(spec(partition="nope"))
    assert str(caught.value) == (
        "server sg-0: sbatch refused the job on partition nope: sbatch: error: invalid "
        "partition specified: nope; sbatch: error: Batch job submission failed: Invalid "
        "partition name specified"
    )


@pytest.mark.parametrize(
    ("rc", "said"), [(127, "sh: 1: sbatch: not found"), (1, "sbatch: Command not found.")]
)
async def test_a_login_node_without_sbatch_is_said_so(rc: int, said: str) -> None:
    # sh's words and status, then csh's (which exits 1).
    with pytest.raises(SlurmError) as caught:
        await SlurmJobs(Scripted({"sbatch": (rc, "", said + "\n")})).submit(SPEC)
    assert str(caught.value) == (
        f"server sg-0: sbatch is not installed (or not on PATH) where it was run: {said}"
    )


async def test_a_failed_listing_is_one_line() -> None:
    run = Scripted({"squeue": (1, "", "squeue: error: Unable to contact slurm controller\n")})
    with pytest.raises(SlurmError) as caught:
        await SlurmJobs(run).ours()
    assert str(caught.value) == ("squeue failed: squeue: error: Unable to contact slurm controller")
