"""Client side of the OpenAI Batch contract (`--api openai-batch`): upload, create, poll,
cancel, download, and the output lines read back by custom_id.

The same server URL and key rules as the live OpenAI path (it is that client, with the
batch calls added, so a live finish can go through the same object). What comes back is
untrusted: an output file may hold a torn last line, a line for a custom_id this batch
never sent, a repeated one, or a body that is not a chat completion. Each such line is
one clear problem naming what and where, and the other lines are kept: a batch is
reconciled line by line, never dropped whole for one bad line and never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.clients.http import request_timeout
from gen_tui.backends.clients.limits import Limits, body, error_body
from gen_tui.backends.clients.openai_api import OpenAIClient, completion_of, request_body
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.clients.wire import json_body, status_failure, transport_errors, typed
from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.store.json_lines import json_lines
from gen_tui.backends.untrusted import QUOTED_CHARS, one_line

ENDPOINT = "/v1/chat/completions"
ENDED = frozenset({"completed", "expired", "cancelled", "failed"})
"""The statuses a batch never leaves: its output and error files are final."""
CONTROL_BYTES = 4 << 20
"""The most bytes of a file or batch object (or a list of 100 batches) read."""
CALL_TIMEOUT_S = 120.0
"""One control call (create, poll, cancel); uploads and downloads get `transfer_timeout_s`."""


@dataclass(frozen=True, slots=True)
class BatchState(BatchView):
    """What the provider says of one batch: what the panel shows of it (`BatchView`, the
    one home of a batch's status, counts and times) and the files and metadata the lane
    needs to collect it."""

    output_file_id: str | None = None
    error_file_id: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.status in ENDED


def batch_state(payload: Any) -> BatchState:
    """A batch object as the provider sent it; a wrong shape is a RequestFailed naming it."""
    if not isinstance(payload, dict):
        raise RequestFailed("the batch object is not a JSON object", retry=True)
    where = "the batch object"
    batch_id = typed(payload, "id", str, where)
    status = typed(payload, "status", str, where)
    if not batch_id or not status:
        raise RequestFailed("the batch object has no id or status", retry=True)
    counts = typed(payload, "request_counts", dict, where) or {}
    metadata = typed(payload, "metadata", dict, where) or {}
    return BatchState(
        id=batch_id,
        status=status,
        total=typed(counts, "total", int, "request_counts") or 0,
        completed=typed(counts, "completed", int, "request_counts") or 0,
        failed=typed(counts, "failed", int, "request_counts") or 0,
        output_file_id=typed(payload, "output_file_id", str, where),
        error_file_id=typed(payload, "error_file_id", str, where),
        created_at=typed(payload, "created_at", (int, float), where),
        expires_at=typed(payload, "expires_at", (int, float), where),
        in_progress_at=typed(payload, "in_progress_at", (int, float), where),
        metadata={str(k): v for k, v in metadata.items() if isinstance(v, str)},
    )


@dataclass
class BatchLines:
    """A batch's output and error files read back: answers and failures by custom_id, and
    one line for each line that could not be read (`problems`)."""

    answers: dict[str, Generation] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    """custom_id: why it has no answer (a failed request, an expired or cancelled line)."""
    problems: list[str] = field(default_factory=list)


def _shown(value: object) -> str:
    return one_line(repr(value), QUOTED_CHARS)


def read_lines(
    data: bytes, expected: Collection[str], where: str, started: float, into: BatchLines
) -> BatchLines:
    """Add the lines of one output or error file (`where` names it) to `into`.

    Only custom_ids in `expected` are taken, each once: a line for another (a foreign or
    repeated one) or a line that is not a whole JSON object is a problem and nothing else.
    A line whose request failed, or whose body is no chat completion, is a failure: its
    sample is given back, never recorded.
    """
    for line in json_lines(data):
        number, item = line.number, line.value
        if not line.parsed:  # torn: no newline after it, cut off most likely
            what = "a torn last line" if line.torn else "a line that is not JSON"
            into.problems.append(f"{where} line {number}: {what} ({line.size:,} bytes), skipped")
            continue
        if not isinstance(item, dict):
            into.problems.append(f"{where} line {number}: not a JSON object, skipped")
            continue
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or custom_id not in expected:
            into.problems.append(
                f"{where} line {number}: custom_id {_shown(custom_id)} is not one this batch "
                "sent, skipped"
            )
            continue
        if custom_id in into.answers or custom_id in into.failures:
            into.problems.append(
                f"{where} line {number}: custom_id {_shown(custom_id)} again, skipped"
            )
            continue
        reason = _failure(item)
        if reason is not None:
            into.failures[custom_id] = reason
            continue
        response = item["response"]
        try:
            into.answers[custom_id] = completion_of(response.get("body"), started)
        except RequestFailed as exc:
            into.failures[custom_id] = exc.reason
    return into


def _failure(item: dict[str, Any]) -> str | None:
    """Why a line holds no answer, or None when it holds a 200 response."""
    error = item.get("error")
    if error is not None:
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            return one_line(f"{code}: {message}", QUOTED_CHARS)
        return one_line(f"error {error!r}", QUOTED_CHARS)
    response = item.get("response")
    if not isinstance(response, dict):
        return "the line has no response"
    status = response.get("status_code")
    if status != 200:
        return one_line(f"HTTP {status!r}", QUOTED_CHARS)
    return None


class BatchClient(OpenAIClient):
    """An OpenAI-compatible API's Batch calls beside its live ones (`--api openai-batch`)."""

    transfer_timeout_s = 1800.0
    """An upload or download of up to 200 MB, on a slow link."""

    def request_line(
        self, custom_id: str, messages: list[dict[str, str]], max_new_tokens: int | None
    ) -> bytes:
        """One line of an input file: the chat the live path would send, not streamed."""
        sampling = self.sampling
        if max_new_tokens is not None:
            sampling = {**sampling, "max_new_tokens": max_new_tokens}
        line = {
            "custom_id": custom_id,
            "method": "POST",
            "url": ENDPOINT,
            "body": request_body(self.model, messages, sampling, stream=False),
        }
        return orjson.dumps(line) + b"\n"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"} if self.secret else {}

    async def _call(
        self,
        method: str,
        url: str,
        path: str,
        *,
        data: Any = None,
        limit: int = CONTROL_BYTES,
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> bytes:
        """The body of one call; a status other than 200 is the live path's RequestFailed."""
        headers = self._headers()
        if isinstance(data, bytes):
            headers["Content-Type"] = "application/json"
        limits = Limits(max_bytes=limit, idle_s=self.limits.idle_s)
        try:
            with transport_errors(url):
                async with self.session.request(
                    method,
                    f"{url}{path}",
                    data=data,
                    headers=headers,
                    timeout=request_timeout(timeout_s),
                ) as response:
                    if response.status != 200:
                        raw = await error_body(response, limits, url)
                        raise status_failure(response.status, raw, response.headers, self.key_hint)
                    return await body(response, limits, url)
        except RequestFailed as exc:
            if self.secret:
                exc.reason = exc.reason.replace(self.secret, "***")
            raise

    async def upload(self, url: str, data: bytes) -> str:
        """Upload an input file (`purpose=batch`); its file id."""
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file", data, filename="gen-tui-batch.jsonl", content_type="application/jsonl"
        )
        raw = await self._call(
            "POST", url, "/v1/files", data=form, timeout_s=self.transfer_timeout_s
        )
        payload = json_body(raw)
        if not isinstance(payload, dict):
            raise RequestFailed("the file object is not a JSON object", retry=True)
        file_id = typed(payload, "id", str, "the file object")
        if not file_id:
            raise RequestFailed("the file object has no id", retry=True)
        return str(file_id)

    async def create(self, url: str, file_id: str, metadata: Mapping[str, str]) -> BatchState:
        """Create a batch of an uploaded file, in the 24 h window."""
        payload = {
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "metadata": dict(metadata),
        }
        raw = await self._call("POST", url, "/v1/batches", data=orjson.dumps(payload))
        return batch_state(json_body(raw))

    async def retrieve(self, url: str, batch_id: str) -> BatchState:
        return batch_state(json_body(await self._call("GET", url, f"/v1/batches/{batch_id}")))

    async def cancel(self, url: str, batch_id: str) -> BatchState:
        raw = await self._call("POST", url, f"/v1/batches/{batch_id}/cancel")
        return batch_state(json_body(raw))

    async def find(self, url: str, key: str, value: str) -> BatchState | None:
        """The newest batch whose metadata has `key` = `value` (among the last 100): how a
        restarted run learns whether a batch it meant to create was created."""
        payload = json_body(await self._call("GET", url, "/v1/batches?limit=100"))
        if not isinstance(payload, dict):
            raise RequestFailed("the batch list is not a JSON object", retry=True)
        for item in typed(payload, "data", list, "the batch list") or []:
            try:
                state = batch_state(item)
            except RequestFailed:
                continue
            if state.metadata.get(key) == value:
                return state
        return None

    async def download(self, url: str, file_id: str, limit: int) -> bytes:
        """A file's content, refused past `limit` bytes."""
        return await self._call(
            "GET",
            url,
            f"/v1/files/{file_id}/content",
            limit=limit,
            timeout_s=self.transfer_timeout_s,
        )

    async def results(
        self, url: str, state: BatchState, expected: Collection[str], limit: int
    ) -> BatchLines:
        """The answers and failures of an ended batch, its two files read line by line."""
        started = time.monotonic() - max(0.0, time.time() - (state.created_at or time.time()))
        lines = BatchLines()
        for name, file_id in (("output", state.output_file_id), ("error", state.error_file_id)):
            if file_id:
                data = await self.download(url, file_id, limit)
                read_lines(data, expected, f"batch {state.id} {name} file", started, lines)
        return lines
