"""SGLang's native API on the simulator: `/generate` (plain, batched and streamed),
`/abort_request`, the health checks and the info endpoints SGLang 0.5.x serves.

It only reads requests and words answers the way SGLang does (validation messages, response
and stream shapes, meta_info, the error bodies); queueing, pacing, aborts and faults are the
shared pipeline's (`pipeline.Simulator.serve`).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from gen_tui.backends.sim.completion import (
    BadRequest,
    Prompt,
    check_lengths,
    count_text_tokens,
    dataset_of,
    detokenize,
    flag,
    stop_candidates,
)
from gen_tui.backends.sim.config import (
    DEFAULT_VOCAB_SIZE,
    FAULT_KINDS,
    SimConfig,
    config_json,
)
from gen_tui.backends.sim.metrics import kv_capacity
from gen_tui.backends.sim.pipeline import (
    DONE,
    MIDWAY_FAILURE,
    Frontend,
    Simulator,
    json_response,
    read_json,
    sse,
)
from gen_tui.backends.sim.slots import Job

__all__ = ["SIM_VERSION", "SglangApi", "error_response"]

SIM_VERSION = "0.5.x-sim"
# `payment_402` is an API provider's answer (credits); SGLang's /generate never gives it.
_GENERATE_FAULTS = tuple(kind for kind in FAULT_KINDS if kind != "payment_402")
_MAX_TOKEN_ID = 2**31


def error_response(status: int, message: str) -> web.Response:
    """SGLang's error body: `{"error": {"message": ...}}`."""
    return json_response({"error": {"message": message}}, status=status)


def _body(
    config: SimConfig,
    job: Job,
    start: int,
    end: int,
    reason: dict[str, Any] | None,
    *,
    final: bool,
) -> dict[str, Any]:
    """One response object; in a stream `start` is where the previous frame ended."""
    if config.stream_output:
        ids = job.output_ids[start:end]
        text = detokenize(ids, leading_space=start > 0)
    else:
        ids = job.output_ids[:end]
        text = detokenize(ids, leading_space=False)
    meta: dict[str, Any] = {
        "id": job.rid,
        "finish_reason": reason,
        "prompt_tokens": job.prompt.prompt_tokens,
        "completion_tokens": end,
        "cached_tokens": 0,
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "dp_rank": None,
    }
    if final:
        meta["e2e_latency"] = asyncio.get_running_loop().time() - job.received
    return {"text": text, "output_ids": ids, "meta_info": meta}


@dataclass
class _Generate:
    """A valid /generate request: one prompt or a batch."""

    sim: Simulator
    prompts: list[Prompt]
    stream: bool
    batch: bool

    def reply(self, results: list[tuple[Job, int]]) -> object:
        config = self.sim.config
        bodies = [
            _body(config, job, 0, produced, job.reason(produced), final=True)
            for job, produced in results
        ]
        return bodies if self.batch else bodies[0]

    def writer(self, job: Job) -> _GenerateStream:
        return _GenerateStream(self.sim, job)


class _GenerateStream:
    """SGLang's stream: one response object per frame, then `data: [DONE]`."""

    def __init__(self, sim: Simulator, job: Job) -> None:
        self._sim = sim
        self._job = job

    def opening(self) -> list[bytes]:
        return []

    def frame(self, start: int, end: int, *, last: bool) -> list[bytes]:
        reason = self._job.reason(end) if last else None
        return [sse(_body(self._sim.config, self._job, start, end, reason, final=last))]

    def failure(self, start: int, end: int) -> list[bytes]:
        """SGLang reports a failed generation as `data: {"error": ..}`, then `[DONE]`."""
        events = self.frame(start, end, last=False) if end > start else []
        return [*events, sse({"error": {"message": MIDWAY_FAILURE}}), DONE]

    def closing(self) -> list[bytes]:
        return [DONE]


class SglangApi(Frontend):
    """The native endpoints, on the simulator they share with the OpenAI front-end."""

    fault_kinds = _GENERATE_FAULTS

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/generate", self.answer)
        router.add_put("/generate", self.answer)
        router.add_post("/abort_request", self.abort_request)
        router.add_get("/health", self.health)
        router.add_get("/health_generate", self.health)
        router.add_get("/get_model_info", self.model_info)
        router.add_get("/get_server_info", self.server_info)
        router.add_get("/get_load", self.load)

    # ---- the pipeline's hooks ------------------------------------------------------------------

    def error(self, status: int, message: str) -> web.Response:
        return error_response(status, message)

    async def parse(self, request: web.Request) -> _Generate:
        if request.content_type != "application/json":
            raise BadRequest(f"Content-Type must be application/json, got {request.content_type!r}")
        return self._parse(await read_json(request))

    # ---- /generate -----------------------------------------------------------------------------

    def _parse(self, payload: object) -> _Generate:
        """Validate a /generate body the way SGLang does."""
        if not isinstance(payload, dict):
            raise BadRequest("The request body must be a JSON object")
        text = payload.get("text")
        input_ids = payload.get("input_ids")
        if text is None and input_ids is None:
            raise BadRequest("Either text, input_ids or input_embeds should be provided.")
        if text is not None and input_ids is not None:
            raise BadRequest("Either text or input_ids should be provided, not both.")
        stream = payload.get("stream", False)
        if not isinstance(stream, bool):
            raise BadRequest(f"stream must be true or false, got {stream!r}")
        items: list[Any]
        if text is not None:
            if not isinstance(text, str | list):
                raise BadRequest("text must be a string or a list of strings")
            batch = isinstance(text, list)
            items = text if isinstance(text, list) else [text]
        else:
            if not isinstance(input_ids, list):
                raise BadRequest("input_ids must be a list of token ids or a list of such lists")
            batch = bool(input_ids) and isinstance(input_ids[0], list)
            items = input_ids if batch else [input_ids]
        if batch and not items:
            raise BadRequest("The batch is empty.")
        if batch and stream:
            raise BadRequest("The simulator does not stream batches; send one prompt per request")
        rids = self._rids(payload.get("rid"), batch, len(items))
        params = self._sampling_params(payload.get("sampling_params"), batch, len(items))
        prompts = [self._prompt(*args) for args in zip(items, rids, params, strict=True)]
        return _Generate(self.sim, prompts, stream, batch)

    @staticmethod
    def _rids(rid: object, batch: bool, count: int) -> list[str]:
        if rid is None:
            return [uuid.uuid4().hex for _ in range(count)]
        if not batch:
            if not isinstance(rid, str):
                raise BadRequest(f"rid must be a string, got {rid!r}")
            return [rid]
        if not isinstance(rid, list):
            raise BadRequest("The rid should be a list for batch processing.")
        if len(rid) != count or not all(isinstance(item, str) for item in rid):
            raise BadRequest("The rid list must hold one string per prompt in the batch.")
        return rid

    @staticmethod
    def _sampling_params(params: object, batch: bool, count: int) -> list[dict[str, Any]]:
        if params is None:
            return [{}] * count
        if isinstance(params, dict):
            return [params] * count
        if (
            batch
            and isinstance(params, list)
            and len(params) == count
            and all(isinstance(item, dict) for item in params)
        ):
            return params
        raise BadRequest("sampling_params must be an object (or one object per batch prompt)")

    def _prompt(self, item: object, rid: str, params: dict[str, Any]) -> Prompt:
        config = self.sim.config
        if isinstance(item, str):
            if not item:
                raise BadRequest("The input text is empty.")
            prompt_tokens = max(1, count_text_tokens(item))
            key = b"text\0" + item.encode("utf-8", "surrogatepass")
        elif isinstance(item, list):
            if not item:
                raise BadRequest("The input_ids is empty.")
            if not all(type(token) is int for token in item):
                raise BadRequest("input_ids must hold integer token ids only")
            limit = config.vocab_size or _MAX_TOKEN_ID
            outside = [token for token in item if not 0 <= token < limit]
            if outside:
                raise BadRequest(
                    f"The input_ids contain ids outside the vocabulary [0, {limit}): "
                    f"{outside[:5]} (a real server would crash on them)."
                )
            prompt_tokens = len(item)
            key = b"ids\0" + orjson.dumps(item)
        else:
            raise BadRequest("Each prompt must be a string or a list of token ids")
        max_new_tokens = check_lengths(
            config.context_length, prompt_tokens, params.get("max_new_tokens"), "max_new_tokens", 0
        )
        return Prompt(
            rid=rid,
            key=key,
            prompt_tokens=prompt_tokens,
            max_new_tokens=max_new_tokens,
            ignore_eos=flag(params, "ignore_eos"),
            stop_candidates=stop_candidates(params),
            dataset=dataset_of(rid),
        )

    # ---- the other endpoints -------------------------------------------------------------------

    async def abort_request(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            payload = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            return error_response(400, f"Invalid JSON body: {exc}")
        if not isinstance(payload, dict):
            return error_response(400, "The request body must be a JSON object")
        self.sim.stats.abort_requests += 1
        self.sim.abort(payload.get("rid"), abort_all=payload.get("abort_all") is True)
        return web.Response(status=200)

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=503 if self.sim.shutting_down else 200)

    async def model_info(self, _request: web.Request) -> web.Response:
        config = self.sim.config
        return json_response(
            {
                "model_path": config.model_path,
                "tokenizer_path": config.model_path,
                "model_type": "simulated",
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
            }
        )

    async def server_info(self, _request: web.Request) -> web.Response:
        config = self.sim.config
        return json_response(
            {
                "version": SIM_VERSION,
                "status": "shutting_down" if self.sim.shutting_down else "ready",
                "model_path": config.model_path,
                "tokenizer_path": config.model_path,
                "served_model_name": config.model_path,
                "context_length": config.context_length,
                "max_running_requests": config.slots,
                "max_total_num_tokens": kv_capacity(config),
                "random_seed": config.seed,
                "stream_output": config.stream_output,
                "stream_interval": config.frame_tokens,
                "vocab_size": config.vocab_size or DEFAULT_VOCAB_SIZE,
                "sim": config_json(config),
            }
        )

    async def load(self, _request: web.Request) -> web.Response:
        """SGLang's legacy /get_load shape: one entry per data-parallel rank (here just one)."""
        jobs = [job for peers in self.sim.jobs.values() for job in peers]
        running = [job for job in jobs if job.state == "running"]
        queued = [job for job in jobs if job.state == "queued"]
        return json_response(
            [
                {
                    "dp_rank": 0,
                    "num_reqs": len(running) + len(queued),
                    "num_running_reqs": len(running),
                    "num_waiting_reqs": len(queued),
                    "num_tokens": sum(job.prompt.prompt_tokens for job in running),
                    "num_pending_tokens": sum(job.prompt.prompt_tokens for job in queued),
                    "ts_tic": asyncio.get_running_loop().time(),
                }
            ]
        )
