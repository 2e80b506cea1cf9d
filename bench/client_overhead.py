"""Client overhead: requests/s and CPU per request of the engine vs a seed-style client.

The baseline is written the way the seed script and SGLang's bench_serving do it: aiohttp,
one semaphore, `asyncio.as_completed` over every prompt, a JSON line per response. Both
clients tokenize the same prompts with the same tokenizer and write the same records; the
simulator (another process) answers at once, so what is measured is the client.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import aiohttp

from bench.common import CACHE, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.engine import Engine
from gen_tui.backends.prompts import Prompt, iter_prompts
from gen_tui.backends.run_config import DatasetSpec, EngineConfig
from gen_tui.backends.tokenizer import encode_messages, load_tokenizer

CONCURRENCY = 150
SAMPLING = {"max_new_tokens": 128}


async def baseline(url: str, count: int) -> None:
    tok = load_tokenizer(str(tokenizer()))
    items = [p for p in iter_prompts(prompts("A", count)) if isinstance(p, Prompt)]
    encoded = [(p.sample_id, encode_messages(tok, p.messages)) for p in items]
    semaphore = asyncio.Semaphore(CONCURRENCY)
    output = CACHE / "out-overhead" / "baseline.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(sample_id: object, ids: list[int]) -> dict:
            async with semaphore:
                body = {"input_ids": ids, "sampling_params": SAMPLING, "rid": f"A/{sample_id}/x"}
                async with session.post(f"{url}/generate", json=body) as response:
                    data = await response.json()
            meta = data["meta_info"]
            return {
                "sample_id": sample_id,
                "output_ids": data["output_ids"],
                "prompt_tokens": meta["prompt_tokens"],
                "completion_tokens": meta["completion_tokens"],
                "finish_reason": meta["finish_reason"]["type"],
            }

        with open(output, "w") as handle:
            for future in asyncio.as_completed([one(sid, ids) for sid, ids in encoded]):
                handle.write(json.dumps(await future) + "\n")
                handle.flush()


async def engine(url: str, count: int) -> None:
    output = CACHE / "out-overhead" / "engine"
    shutil.rmtree(output, ignore_errors=True)
    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", count))],
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=CONCURRENCY,
        sampling=SAMPLING,
    )
    await Engine(config).run()


def measure(client, url: str, count: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(client(url, count))
    return time.perf_counter() - wall, time.process_time() - cpu


def run(smoke: bool, write: bool) -> bool:
    count = 600 if smoke else 6000
    with simulator(
        "--slots", "1000", "--tokens-per-s", "1e9", "--default-mean", "64", "--seed", "2"
    ) as url:
        load_tokenizer(str(tokenizer()))
        measure(baseline, url, min(count, 200))
        results = {
            "baseline (semaphore + as_completed)": measure(baseline, url, count),
            "gen-tui engine": measure(engine, url, count),
        }
    base_wall, base_cpu = results["baseline (semaphore + as_completed)"]
    table = Table(
        "client_overhead",
        f"Client overhead ({count:,} requests, concurrency {CONCURRENCY}, zero-latency server)",
        f"python -m bench client_overhead{' --smoke' if smoke else ''}",
        ["client", "requests/s", "CPU ms/request", "throughput vs baseline", "target"],
    )
    ratio = base_wall / results["gen-tui engine"][0]
    for name, (wall, cpu) in results.items():
        is_engine = name == "gen-tui engine"
        table.add(
            name,
            f"{count / wall:.0f}",
            f"{cpu / count * 1000:.2f}",
            f"{base_wall / wall:.2f}x",
            f">= 1.0x: {verdict(ratio >= 1.0)}" if is_engine else "(baseline)",
        )
    table.notes.append(
        "Both include tokenization and writing records; the engine also keeps budgets, the "
        "lock, progress.json and snapshots. CPU is this process's (the simulator runs apart)."
    )
    publish(table, write)
    return ratio >= 1.0 and base_cpu > 0
