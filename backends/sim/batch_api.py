"""OpenAI's Batch contract on the simulator: files, batches, their status, output and error files.

What a provider's batch does, on a clock a test can shrink (`SimConfig.batch_*`): a new
batch says `validating`, then `in_progress` with its `request_counts` moving as its lines
finish evenly over `batch_delay_s` (the first line first), then `finalizing`, then
`completed` with an output file (and an error file when some failed). One not done within
`batch_window_s` expires with the lines it finished, a cancelled one keeps the lines done
by the cancel; both bill those, and their other lines go to the error file as
`batch_expired` / `batch_cancelled`, as OpenAI writes them.

The state is worked out from the wall clock whenever a batch is read, so nothing runs in
the background and a client that dies mid-batch finds it done when it comes back. Each
answer is the same deterministic completion a live chat gets (`completion.plan`), billed at
`batch_price_share` of the live price. `ledger` counts every custom_id the simulator ever
answered, over all batches: the proof a restarted client sent no sample twice
(`GET /_sim/batches`).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from gen_tui.backends.sim.completion import BadRequest, plan
from gen_tui.backends.sim.config import cost
from gen_tui.backends.sim.openai_api import OpenAIApi, openai_error
from gen_tui.backends.sim.pipeline import Simulator, json_response
from gen_tui.backends.sim.slots import Job

__all__ = ["BatchApi"]

ENDPOINT = "/v1/chat/completions"
MAX_FILE_BYTES = 200 * 2**20
"""OpenAI's bound on a batch input file."""
MAX_REQUESTS = 50_000
"""OpenAI's bound on the requests of one batch."""
DATASET_METADATA = "sim_dataset"
"""The batch metadata key that names the dataset (length profile) its lines belong to, as
the `X-Sim-Dataset` header does for a live chat."""


@dataclass
class _File:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    lines: list[tuple[str, dict[str, Any]]]
    """(custom_id, body) of each request, in the file's order."""
    dataset: str
    metadata: dict[str, str] | None
    created: float
    status: str = "validating"
    settled: bool = False
    cancel_at: float | None = None
    done: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    stamps: dict[str, int] = field(default_factory=dict)


def _fails(custom_id: str, share: float) -> bool:
    """Whether this line fails: drawn from its custom_id, so the same line always does."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(custom_id.encode("utf-8", "surrogateescape"), digest_size=8)
    return int.from_bytes(digest.digest(), "big") / 2**64 < share


class BatchApi:
    """The Batch routes over the simulator shared with the live APIs."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.chat = OpenAIApi(sim)
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self.ledger: Counter[str] = Counter()
        """How many times each custom_id was answered (output or error line), all batches."""
        self.cost = 0.0

    def add_routes(self, router: web.UrlDispatcher) -> None:
        keyed = self._keyed
        router.add_post("/v1/files", keyed(self.upload))
        router.add_get("/v1/files/{id}/content", keyed(self.content))
        router.add_post("/v1/batches", keyed(self.create))
        router.add_get("/v1/batches", keyed(self.list_batches))
        router.add_get("/v1/batches/{id}", keyed(self.retrieve))
        router.add_post("/v1/batches/{id}/cancel", keyed(self.cancel))
        router.add_get("/_sim/batches", self.show_ledger)

    def _keyed(self, handler: Handler) -> Handler:
        """`handler` behind the chat route's key check: every Batch route asks for the same
        API key (`--api-key-env`) a live chat does, and refuses alike without it."""

        async def checked(request: web.Request) -> web.StreamResponse:
            denied = self.chat.authorize(request)
            return denied if denied is not None else await handler(request)

        return checked

    # ---- files ---------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            return openai_error(400, "POST /v1/files takes multipart/form-data")
        form = await request.post()
        purpose = form.get("purpose")
        upload = form.get("file")
        if purpose != "batch":
            return openai_error(400, f"purpose must be 'batch', got {purpose!r}")
        if not isinstance(upload, web.FileField):
            return openai_error(400, "no file part in the upload")
        data = upload.file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return openai_error(400, f"the file is over {MAX_FILE_BYTES >> 20} MB")
        item = _File(f"file-{uuid.uuid4().hex}", "batch", upload.filename, data, int(time.time()))
        self.files[item.id] = item
        return json_response(item.json())

    async def content(self, request: web.Request) -> web.Response:
        item = self.files.get(request.match_info["id"])
        if item is None:
            return openai_error(404, "No such file")
        return web.Response(body=item.data, content_type="application/octet-stream")

    # ---- batches -------------------------------------------------------------------------------

    def _lines(self, data: bytes) -> list[tuple[str, dict[str, Any]]]:
        """The requests of an input file, checked as OpenAI checks them (a bad file: 400)."""
        lines: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        for number, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                item = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise BadRequest(f"line {number} is not JSON") from None
            if not isinstance(item, dict):
                raise BadRequest(f"line {number} is not a JSON object")
            custom_id, body = item.get("custom_id"), item.get("body")
            if not isinstance(custom_id, str) or not custom_id:
                raise BadRequest(f"line {number}: custom_id must be a non-empty string")
            if custom_id in seen:
                raise BadRequest(f"line {number}: custom_id {custom_id!r} is not unique")
            if item.get("method") != "POST" or item.get("url") != ENDPOINT:
                raise BadRequest(f"line {number}: method and url must be POST {ENDPOINT}")
            if not isinstance(body, dict):
                raise BadRequest(f"line {number}: body must be an object")
            seen.add(custom_id)
            lines.append((custom_id, body))
        if not lines:
            raise BadRequest("the input file has no requests")
        if len(lines) > MAX_REQUESTS:
            raise BadRequest(f"the input file has over {MAX_REQUESTS:,} requests")
        return lines

    async def create(self, request: web.Request) -> web.Response:
        try:
            payload = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return openai_error(400, "the body is not JSON")
        if not isinstance(payload, dict):
            return openai_error(400, "the body must be a JSON object")
        if payload.get("endpoint") != ENDPOINT:
            return openai_error(400, f"endpoint must be {ENDPOINT}")
        if payload.get("completion_window") != "24h":
            return openai_error(400, "completion_window must be '24h'")
        item = self.files.get(str(payload.get("input_file_id")))
        if item is None or item.purpose != "batch":
            return openai_error(404, "No such input file")
        metadata = payload.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
        ):
            return openai_error(400, "metadata must map strings to strings")
        try:
            lines = self._lines(item.data)
        except BadRequest as exc:
            return openai_error(400, str(exc))
        dataset = (metadata or {}).get(DATASET_METADATA, "")
        now = time.time()
        batch = _Batch(f"batch_{uuid.uuid4().hex}", item.id, lines, dataset, metadata, now)
        batch.stamps["created_at"] = int(now)
        self.batches[batch.id] = batch
        return json_response(self._json(batch))

    async def list_batches(self, request: web.Request) -> web.Response:
        """The batches, newest first (`limit`, default 20, up to 100), as OpenAI lists them."""
        try:
            limit = min(100, max(1, int(request.query.get("limit", "20"))))
        except ValueError:
            return openai_error(400, "limit must be an integer")
        newest = sorted(self.batches.values(), key=lambda b: b.created, reverse=True)[:limit]
        data = [self._json(batch) for batch in newest]
        return json_response({"object": "list", "data": data, "has_more": False})

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return openai_error(404, "No such batch")
        return json_response(self._json(batch))

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return openai_error(404, "No such batch")
        self._advance(batch, time.time())
        if not batch.settled and batch.cancel_at is None:
            batch.cancel_at = time.time()
            batch.stamps["cancelling_at"] = int(batch.cancel_at)
            batch.status = "cancelling"
            return json_response(self._json(batch, advance=False))
        return json_response(self._json(batch))

    async def show_ledger(self, _request: web.Request) -> web.Response:
        """What the tests read: every custom_id answered and how often, the batches' states,
        and what batches were billed."""
        return json_response(
            {
                "ledger": dict(self.ledger),
                "batches": {b.id: self._json(b) for b in self.batches.values()},
                "cost": self.cost,
            }
        )

    # ---- the clock -----------------------------------------------------------------------------

    def _done_by(self, batch: _Batch, moment: float) -> int:
        """Lines finished `moment` seconds (wall clock) after the batch's creation."""
        config = self.sim.config
        running = moment - batch.created - config.batch_validate_s
        if running < 0:
            return 0
        if config.batch_delay_s <= 0:
            return len(batch.lines)
        return min(len(batch.lines), int(len(batch.lines) * running / config.batch_delay_s))

    def _advance(self, batch: _Batch, now: float) -> None:
        """Bring `batch` to where the clock says it is; settle it once it ends."""
        if batch.settled:
            return
        config = self.sim.config
        deadline = batch.created + config.batch_window_s
        if batch.cancel_at is not None:
            self._settle(batch, "cancelled", self._done_by(batch, batch.cancel_at), now)
            return
        if now >= deadline and self._done_by(batch, deadline) < len(batch.lines):
            self._settle(batch, "expired", self._done_by(batch, deadline), now)
            return
        done = self._done_by(batch, now)
        batch.done = sum(1 for c, _ in batch.lines[:done] if not _fails(c, config.batch_fail_share))
        batch.failed = done - batch.done
        if now - batch.created < config.batch_validate_s:
            batch.status = "validating"
        elif done < len(batch.lines):
            batch.status = "in_progress"
            batch.stamps.setdefault("in_progress_at", int(now))
        else:
            finished = batch.created + config.batch_validate_s + config.batch_delay_s
            if now < finished + config.batch_finalize_s:
                batch.status = "finalizing"
                batch.stamps.setdefault("finalizing_at", int(now))
            else:
                self._settle(batch, "completed", len(batch.lines), now)

    def _settle(self, batch: _Batch, status: str, done: int, now: float) -> None:
        """Write the output and error files of a batch that ended with `done` lines finished."""
        config = self.sim.config
        out: list[bytes] = []
        errors: list[bytes] = []
        for index, (custom_id, body) in enumerate(batch.lines):
            if index >= done:
                code = f"batch_{status}" if status != "completed" else "batch_failed"
                errors.append(self._error_line(custom_id, None, code, f"the batch {status}"))
                continue
            self.ledger[custom_id] += 1
            if _fails(custom_id, config.batch_fail_share):
                errors.append(self._error_line(custom_id, 500, "server_error", "simulated failure"))
                continue
            out.append(self._answer(batch, custom_id, body))
        batch.done = len(out)
        batch.failed = len(batch.lines) - len(out)
        batch.status = status
        batch.settled = True
        batch.stamps[f"{status}_at"] = int(now)
        if len(out) >= 2 and config.batch_damage:  # a batch of one is left whole
            out[-1] = out[-1][: len(out[-1]) // 2]
            out.insert(1, self._line("not-in-this-batch", 200, {"choices": []}))
        if out:
            batch.output_file_id = self._store(f"{batch.id}_output.jsonl", out)
        if errors:
            batch.error_file_id = self._store(f"{batch.id}_error.jsonl", errors)

    def _store(self, name: str, lines: list[bytes]) -> str:
        item = _File(
            f"file-{uuid.uuid4().hex}", "batch_output", name, b"".join(lines), int(time.time())
        )
        self.files[item.id] = item
        return item.id

    def _answer(self, batch: _Batch, custom_id: str, body: dict[str, Any]) -> bytes:
        """The output line of one request: the chat completion a live request would get."""
        config = self.sim.config
        try:
            chat = self.chat._parse_chat(body, batch.dataset)
        except BadRequest as exc:
            return self._line(custom_id, 400, {"error": {"message": str(exc), "code": 400}})
        job = Job(chat.prompt, 0.0)
        job.output_ids, job.finish_reason = plan(config, chat.prompt)
        produced = len(job.output_ids)
        reply = chat.reply([(job, produced)])
        assert isinstance(reply, dict)
        usage = reply["usage"]
        billed = cost(config, usage["prompt_tokens"], produced)
        if billed is not None:
            usage["cost"] = billed * config.batch_price_share
            self.cost += usage["cost"]
        self.sim.stats.completed += 1
        self.sim.stats.total_completion_tokens += produced
        return self._line(custom_id, 200, reply)

    @staticmethod
    def _line(custom_id: str, status: int, body: dict[str, Any]) -> bytes:
        line = {
            "id": f"batch_req_{uuid.uuid4().hex}",
            "custom_id": custom_id,
            "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": body},
            "error": None,
        }
        return orjson.dumps(line) + b"\n"

    @staticmethod
    def _error_line(custom_id: str, status: int | None, code: str, message: str) -> bytes:
        response = None
        if status is not None:
            error = {"message": message, "code": status}
            response = {"status_code": status, "request_id": uuid.uuid4().hex, "body": error}
        line = {
            "id": f"batch_req_{uuid.uuid4().hex}",
            "custom_id": custom_id,
            "response": response,
            "error": {"code": code, "message": message},
        }
        return orjson.dumps(line) + b"\n"

    def _json(self, batch: _Batch, *, advance: bool = True) -> dict[str, Any]:
        if advance:
            self._advance(batch, time.time())
        window = int(batch.created + self.sim.config.batch_window_s)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "errors": None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": batch.stamps["created_at"],
            "in_progress_at": batch.stamps.get("in_progress_at"),
            "expires_at": window,
            "finalizing_at": batch.stamps.get("finalizing_at"),
            "completed_at": batch.stamps.get("completed_at"),
            "failed_at": None,
            "expired_at": batch.stamps.get("expired_at"),
            "cancelling_at": batch.stamps.get("cancelling_at"),
            "cancelled_at": batch.stamps.get("cancelled_at"),
            "request_counts": {
                "total": len(batch.lines),
                "completed": batch.done,
                "failed": batch.failed,
            },
            "metadata": batch.metadata,
        }
