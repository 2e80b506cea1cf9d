"""Issue 34's three lanes (issue 33's batch lane as one of them): real `gen-tui sim`
processes as a slow free SGLang box, a fast priced OpenAI API and a slower cheap batch
lane (the simulator's Batch API), and a real `gen-tui run` over them with one budget, a
deadline the box alone misses and a spend cap. Each lane takes what the plan gives it (the
batch lane, cheaper than the API, is bought first, and the API closes what the batch
lane's turnaround cannot), the cap is never passed, the budget is kept within its
precision, every sample is answered once (the batch simulator's ledger and the records),
and verify and export hold across the three lanes' APIs. Seconds, not hours."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.export.exporter import ExportOptions, export_run
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.plan import Lane, plan
from gen_tui.backends.store.batch_journal import BatchJournal
from gen_tui.backends.store.manifest import read_manifest
from tests.support.batch_sim import journal_lines, sim_call
from tests.support.fleet_sim import records, sim, until_first_plan
from tests.support.run_output import ENV, GEN_TUI

pytestmark = pytest.mark.timeout(180)

BOX = ("--slots", "4", "--tokens-per-s", "50")  # 200 tok/s, free
API = ("--slots", "32", "--tokens-per-s", "200", "--cost", "0,10")  # $10 per M out
BATCH = ("--cost", "0,10")  # billed at the simulator's batch share: $5 per M out
BATCH_DELAY_S = 3.0
"""The simulator's time for a batch's requests: with its validating and finalizing, and
the lane's polls, a turnaround of about 3.5 s."""
BATCH_REQUESTS, BATCH_IN_FLIGHT = 20, 2
MAX_NEW = 200
API_PRICE, BATCH_PRICE = 10e-6, 5e-6


def start_run(
    tmp_path: Path, tokenizer_dir: Path, box: str, api: str, batch: str, budget: int
) -> subprocess.Popen[str]:
    write_prompts(tmp_path / "prompts" / "A.jsonl", budget // 20)
    args = [
        "run", "--plain", "--prompts-dir", str(tmp_path / "prompts"),
        "--tokenizer", str(tokenizer_dir), "--output-dir", str(tmp_path / "out"),
        "--lane", f"box={box}",
        "--lane", f"api={api},api=openai,concurrency=16,price=0/10",
        "--lane", f"batch={batch},api=openai-batch,price=0/5,turnaround=4s",
        "--batch-max-requests", str(BATCH_REQUESTS), "--batch-in-flight", str(BATCH_IN_FLIGHT),
        "--batch-poll", "0.1",
        "--concurrency", "4", "--max-tokens-per-dataset", str(budget),
        "--max-new-tokens", str(MAX_NEW), "--deadline", "20s", "--max-cost", "0.5",
        "--plan-every", "2", "--model", "sim-model",
    ]  # fmt: skip
    return subprocess.Popen(
        [*GEN_TUI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=ENV,
        text=True,
        start_new_session=True,
    )


def wait_for_open_batches(run: subprocess.Popen[str], folder: Path) -> None:
    """Until `folder`'s journal holds open batches, each with its provider's id."""
    deadline = time.monotonic() + 60
    while True:
        journal = BatchJournal(folder)
        opened = folder.exists() and journal.load() == [] and bool(journal.open)
        if opened and all(b.batch_id for b in journal.open.values()):
            return
        assert run.poll() is None and time.monotonic() < deadline, "no batch created"
        time.sleep(0.05)


def test_three_lanes_each_take_the_plans_share_within_the_budget_and_the_cap(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    budget, deadline = 20_000, 20.0
    with (
        sim(vocab_size, *BOX) as (box, _),
        sim(vocab_size, *API) as (api, _),
        sim(vocab_size, *BATCH) as (batch, _),
    ):
        sim_call(batch, "/_sim/config", {"batch_delay_s": BATCH_DELAY_S})
        started = time.time()
        run = start_run(tmp_path, tokenizer_dir, box, api, batch, budget)
        out, _ = run.communicate(timeout=150)
        ledger = sim_call(batch, "/_sim/batches")["ledger"]
    assert run.returncode == 0, out
    folder = tmp_path / "out" / "A"
    made = records(folder)
    ids = [r["sample_id"] for r in made]
    assert len(set(ids)) == len(ids)  # each sample once
    assert set(ledger.values()) == {1}, ledger  # no sample sent twice as a batch line
    tokens = sum(r["completion_tokens"] for r in made)
    assert budget <= tokens <= budget + MAX_NEW, out  # the budget, within its precision
    by_lane = {lane: [r for r in made if r["lane"] == lane] for lane in ("box", "api", "batch")}
    assert {r["api"] for r in by_lane["box"]} == {"sglang"}
    assert {r["api"] for r in by_lane["api"]} == {"openai"}
    assert {r["api"] for r in by_lane["batch"]} == {"openai-batch"}
    assert len(by_lane["batch"]) == len(ledger)  # every line the batches answered is a record
    # Every lane worked: the box always, the cheap batch lane as far as its turnaround
    # lets it, the API for the rest.
    assert all(by_lane.values()), {lane: len(rows) for lane, rows in by_lane.items()}
    lane_tokens = {
        lane: sum(r["completion_tokens"] for r in rows) for lane, rows in by_lane.items()
    }
    spent = {lane: sum(r["cost"] for r in rows) for lane, rows in by_lane.items()}
    assert spent["box"] == 0
    assert spent["batch"] == pytest.approx(lane_tokens["batch"] * BATCH_PRICE)
    assert spent["api"] == pytest.approx(lane_tokens["api"] * API_PRICE)
    assert sum(spent.values()) <= 0.5  # the cap
    # By the deadline (from the first request, as test_fleet_plan counts it).
    first = min(r["created"] - r["latency_s"] for r in by_lane["box"] + by_lane["api"])
    assert started < first and max(r["created"] for r in made) <= first + deadline, out
    assert budget / (4 * 50) > 3 * deadline  # the box alone would miss it by far
    # The plan named the three lanes, and bought the batch lane before the dearer API.
    said = [line for line in out.splitlines() if "info: plan: " in line]
    assert said and "batch " in said[0] and "api " in said[0], out
    # Within 5% of the offline least-cost mix at the rates this run saw (the box's delivered
    # rate, the API's, the batch lane's waves over its turnaround), from the first plan on:
    # no lane is bought before it (the box's rate is not known yet), and the batch lane's
    # whole waves make the cost jump with the waves a window holds. The window is the one
    # the planner had: to the deadline (counted from the process's start, a little before
    # the engine's), less one answer of the box (its tail: the last answers land by it).
    box_rows = by_lane["box"]
    box_span = max(r["created"] for r in box_rows) - min(
        r["created"] - r["latency_s"] for r in box_rows
    )
    box_latency = sum(r["latency_s"] for r in box_rows) / len(box_rows)
    box_rate = lane_tokens["box"] / (box_span - box_latency)
    mean = tokens / len(made)
    turnaround = BATCH_DELAY_S + 0.5
    wave = BATCH_REQUESTS * BATCH_IN_FLIGHT * mean
    planned = min(line["created"] for line in journal_lines(folder) if "intent" in line)
    before = sum(r["completion_tokens"] for r in made if r["created"] <= planned)
    window = started + deadline - planned - box_latency
    offline = plan(
        [
            Lane("box", box_rate, 0.0, box_latency),
            Lane("api", 16 * 200.0, API_PRICE),
            Lane("batch", wave / turnaround, BATCH_PRICE, turnaround, wave=wave),
        ],
        budget - before,
        window,
    )
    spent_before = sum(r["cost"] for r in made if r["created"] <= planned)
    assert offline.tokens["batch"] > 0 and offline.tokens["api"] > 0, offline
    assert sum(spent.values()) - spent_before <= 1.05 * offline.cost, (spent, offline, out)
    # The manifest lists the three lanes; verify and export hold across their APIs.
    setup = read_manifest(folder).single_setup()
    assert setup.api == "openai+openai-batch+sglang"
    assert [entry.split("=", 1)[0] for entry in setup.servers] == ["box", "api", "batch"]
    assert verify_dataset(folder, {}).ok
    rows: list[bytes] = []
    tally = export_run(tmp_path / "out", None, ExportOptions("sharegpt"), rows.append, print)
    assert tally.exported == len(made) and not tally.skipped, tally


def test_the_api_gone_halfway_moves_the_rest_to_the_box_and_the_batch_lane(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    budget = 20_000
    with (
        sim(vocab_size, *BOX) as (box, _),
        sim(vocab_size, *API) as (api, fast),
        sim(vocab_size, *BATCH) as (batch, _),
    ):
        sim_call(batch, "/_sim/config", {"batch_delay_s": BATCH_DELAY_S})
        run = start_run(tmp_path, tokenizer_dir, box, api, batch, budget)
        lines = until_first_plan(run)
        time.sleep(0.5)
        fast.kill()
        fast.wait(timeout=10)
        rest, _ = run.communicate(timeout=150)
        ledger = sim_call(batch, "/_sim/batches")["ledger"]
    out = "".join(lines) + rest
    assert run.returncode == 0, out
    made = records(tmp_path / "out" / "A")
    ids = [r["sample_id"] for r in made]
    assert len(set(ids)) == len(ids) and set(ledger.values()) == {1}
    tokens = sum(r["completion_tokens"] for r in made)
    assert budget <= tokens <= budget + MAX_NEW, out
    said = [line for line in out.splitlines() if "plan changed: api lane " in line]
    assert said and " moved to " in said[0], out
    moved_to = said[0].split(" moved to ", 1)[1]
    assert "batch" in moved_to or "box" in moved_to, said[0]
    # The plan after it gives the API nothing; the batch lane went on taking its share.
    after = out.split(said[0], 1)[1]
    assert "created with" in after, out
    assert sum(r["cost"] for r in made) <= 0.5
    assert {r["lane"] for r in made} == {"box", "api", "batch"}


def test_kill_9_with_the_batch_lanes_batches_in_flight_then_the_same_command(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """Exactly once across a restart, as with the batch lane alone: the batches the killed
    fleet run left open are polled and downloaded by the same command, never sent again;
    no record lost or doubled over the three lanes."""
    budget = 20_000
    folder = tmp_path / "out" / "A"
    with (
        sim(vocab_size, *BOX) as (box, _),
        sim(vocab_size, *API) as (api, _),
        sim(vocab_size, *BATCH) as (batch, _),
    ):
        sim_call(batch, "/_sim/config", {"batch_delay_s": 60.0})  # still out at the kill
        first = start_run(tmp_path, tokenizer_dir, box, api, batch, budget)
        wait_for_open_batches(first, folder)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        left = BatchJournal(folder)
        assert left.load() == [] and left.open
        in_flight = {b.batch_id for b in left.open.values()}
        samples = {s for b in left.open.values() for s in b.samples}
        sim_call(batch, "/_sim/config", {"batch_delay_s": 0.5})
        second = start_run(tmp_path, tokenizer_dir, box, api, batch, budget)
        out, _ = second.communicate(timeout=150)
        ledger = sim_call(batch, "/_sim/batches")
    assert second.returncode == 0, out
    assert "polled, not sent again" in out, out
    assert set(ledger["ledger"].values()) == {1}, ledger["ledger"]  # no line sent twice
    made = records(folder)
    ids = [str(r["sample_id"]) for r in made]
    assert len(set(ids)) == len(ids)  # no record doubled
    for batch_id in in_flight:  # the killed run's batches were downloaded: records now
        assert ledger["batches"][batch_id]["status"] == "completed"
        assert f"batch {batch_id} completed: " in out, out
    batch_records = {str(r["sample_id"]) for r in made if r["lane"] == "batch"}
    assert samples <= batch_records
    assert batch_records == {cid.split("/", 1)[1] for cid in ledger["ledger"]}  # none lost
    tokens = sum(r["completion_tokens"] for r in made)
    assert budget <= tokens <= budget + MAX_NEW, out
    after = BatchJournal(folder)
    assert after.load() == [] and not after.open


def test_sigterm_cancels_the_batch_lanes_batches_and_drains_the_live_lanes(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """A stop (`k`, SIGTERM) of a fleet run: the batch lane cancels its batches in flight
    and keeps the lines they finished (the provider bills those), the live lanes drain,
    and nothing is left open in the journal or written twice."""
    folder = tmp_path / "out" / "A"
    with (
        sim(vocab_size, *BOX) as (box, _),
        sim(vocab_size, *API) as (api, _),
        sim(vocab_size, *BATCH) as (batch, _),
    ):
        sim_call(batch, "/_sim/config", {"batch_delay_s": 4.0})
        run = start_run(tmp_path, tokenizer_dir, box, api, batch, 20_000)
        wait_for_open_batches(run, folder)
        time.sleep(1.5)  # a part of each batch done
        os.killpg(run.pid, signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
        ledger = sim_call(batch, "/_sim/batches")
    assert run.returncode == 0, out
    assert "stopping: cancelling " in out and "bills the requests each finished" in out, out
    assert {b["status"] for b in ledger["batches"].values()} <= {"cancelled", "completed"}
    assert "cancelled" in {b["status"] for b in ledger["batches"].values()}, ledger["batches"]
    made = records(folder)
    ids = [str(r["sample_id"]) for r in made]
    assert len(set(ids)) == len(ids)
    # The lines the batches finished before the cancel are records, and only those.
    answered = {cid.split("/", 1)[1] for cid in ledger["ledger"]}
    assert {str(r["sample_id"]) for r in made if r["lane"] == "batch"} == answered
    assert set(ledger["ledger"].values()) == {1}
    journal = BatchJournal(folder)
    assert journal.load() == [] and not journal.open


def test_a_box_only_run_resumed_as_a_fleet_verifies_and_exports_as_one(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """Issue 34: the box-only run's records carry no `api`; resumed as a fleet, they are
    checked as its manifest's (`sglang`) and the fleet's by their own lane's API: verify
    and export take the two runs' records together, none refused as `different api`."""
    write_prompts(tmp_path / "prompts" / "A.jsonl", 400)
    common = [
        "run", "--plain", "--prompts-dir", str(tmp_path / "prompts"),
        "--tokenizer", str(tokenizer_dir), "--output-dir", str(tmp_path / "out"),
        "--concurrency", "4", "--max-new-tokens", str(MAX_NEW), "--model", "sim-model",
    ]  # fmt: skip
    folder = tmp_path / "out" / "A"
    with sim(vocab_size, *BOX) as (box, _), sim(vocab_size, *API) as (api, _):
        alone = subprocess.run(
            [*GEN_TUI, *common, "--server-url", box, "--max-tokens-per-dataset", "1000"],
            capture_output=True, text=True, env=ENV, timeout=120, check=False,
        )  # fmt: skip
        assert alone.returncode == 0, alone.stdout + alone.stderr
        first = records(folder)
        assert first and all("api" not in r for r in first)
        fleet = subprocess.run(
            [*GEN_TUI, *common, "--max-tokens-per-dataset", "3000",
             "--lane", f"box={box}", "--lane", f"api={api},api=openai,price=0/10"],
            capture_output=True, text=True, env=ENV, timeout=120, check=False,
        )  # fmt: skip
        assert fleet.returncode == 0, fleet.stdout + fleet.stderr
    made = records(folder)
    assert len(made) > len(first) and {r.get("api") for r in made[len(first) :]} <= {
        "sglang",
        "openai",
    }
    setups = read_manifest(folder).setups
    assert [s.api for s in setups] == ["sglang", "openai+sglang"]
    assert read_manifest(folder).single_setup().api == "sglang"
    verdict = verify_dataset(folder, {})
    assert verdict.ok, verdict.first
    rows: list[bytes] = []
    tally = export_run(tmp_path / "out", None, ExportOptions("sharegpt"), rows.append, print)
    assert tally.exported == len(made) and not tally.skipped, tally


def test_the_api_out_of_credits_halfway_moves_the_rest_to_the_box_and_the_batch_lane(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """Issue 34's Done-when, its second half, with the three lanes: the fast priced API
    answers 402 (out of credits) from early in its share on. The run finishes without
    pausing; the plan moves the API's rest to the box and the batch lane and says so and
    why; no sample is lost or made twice (records, the batch simulator's ledger, no errors
    noted), the budget is kept within its precision and the cap never passed; progress.json's
    plan carries the API as out of credits."""
    budget = 20_000
    with (
        sim(vocab_size, *BOX) as (box, _),
        sim(vocab_size, *API) as (api, _),
        sim(vocab_size, *BATCH) as (batch, _),
    ):
        sim_call(batch, "/_sim/config", {"batch_delay_s": BATCH_DELAY_S})
        run = start_run(tmp_path, tokenizer_dir, box, api, batch, budget)
        lines = until_first_plan(run)
        time.sleep(0.5)
        sim_call(api, "/_sim/config", {"faults": {"payment_402": 1.0}})  # every request now
        rest, _ = run.communicate(timeout=150)
        ledger = sim_call(batch, "/_sim/batches")["ledger"]
    out = "".join(lines) + rest
    assert run.returncode == 0, out
    folder = tmp_path / "out" / "A"
    made = records(folder)
    ids = [r["sample_id"] for r in made]
    assert len(set(ids)) == len(ids), out  # none twice
    assert set(ledger.values()) == {1}, ledger  # no batch line sent twice
    by_lane = {lane: [r for r in made if r["lane"] == lane] for lane in ("box", "api", "batch")}
    assert len(by_lane["batch"]) == len(ledger)  # every line the batches answered is a record
    assert not (folder / "errors.jsonl").exists(), out  # none given up to the 402s
    tokens = sum(r["completion_tokens"] for r in made)
    assert budget <= tokens <= budget + MAX_NEW, out  # the budget, within its precision
    # The API answered before its credits ran out and never after; the others did the rest.
    assert all(by_lane.values()), {lane: len(rows) for lane, rows in by_lane.items()}
    assert sum(r["cost"] for r in made) <= 0.5  # the cap
    # Said: the 402 takes the API alone out, and the plan moves its rest, saying why.
    assert "its tokens go to the other lanes" in out, out
    said = [line for line in out.splitlines() if "plan changed: api lane " in line]
    assert said and "plan changed: api lane out of credits: " in said[0], out
    moved_to = said[0].split(" moved to ", 1)[1]
    assert "batch" in moved_to or "box" in moved_to, said[0]
    assert "dispatch paused" not in out, out  # the box and the batch lane went on
    # Every plan after it gives the API nothing.
    after = out.split(said[0], 1)[1]
    later = [line for line in after.splitlines() if "plan changed: " in line]
    assert all(" api " not in line.split("now ", 1)[-1] for line in later), later
    progress = orjson.loads((folder / "progress.json").read_bytes())
    lanes = {lane["name"]: lane for lane in progress["plan"]["lanes"]}
    assert lanes["api"]["state"] == "out of credits" and lanes["api"]["tokens"] == 0, lanes
