"""The simulator as an aiohttp application (`create_app`) and on a real socket (`SimServer`),
with the `/_sim/*` control endpoints the tests and the demo use to read stats and change the
config of a running server.
"""

from __future__ import annotations

import logging

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from gen_tui.backends.sim.batch_api import BatchApi
from gen_tui.backends.sim.config import SimConfig, SimStats, config_json
from gen_tui.backends.sim.metrics import metrics_handler
from gen_tui.backends.sim.openai_api import OpenAIApi
from gen_tui.backends.sim.pipeline import Simulator, json_response
from gen_tui.backends.sim.sglang_api import SglangApi, error_response

__all__ = ["SimServer", "create_app", "quiet_bad_requests"]

_CLIENT_MAX_SIZE = 256 * 2**20
_SIM = web.AppKey("gen_tui_sim", Simulator)
_BATCHES = web.AppKey("gen_tui_sim_batches", BatchApi)


class _OneLine(logging.Filter):
    """aiohttp's log of a request it could not parse, as one line instead of a traceback.

    SGLang's router opens every worker with an HTTP/2 (gRPC) preface to learn which protocol
    it speaks, then falls back to HTTP/1.1; aiohttp answers 400 and logs the attempt with
    its traceback and the raw bytes. A uvicorn-served SGLang logs one warning line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = "refused a request that is not HTTP/1.1 (%s %s) from %s"
            # the peer, aiohttp's last argument (a tuple: the message is %-formatted)
            said = record.args if isinstance(record.args, tuple) and record.args else ("?",)
            record.args = (exc.code, type(exc).__name__, said[-1])
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_bad_requests() -> None:
    """Log unparseable requests as one line each (see _OneLine); for the `gen-tui sim`
    process, whose stderr a user reads."""
    logging.getLogger("aiohttp.server").addFilter(_OneLine())


async def _sim_stats(request: web.Request) -> web.Response:
    return json_response(request.app[_SIM].stats)


async def _sim_config(request: web.Request) -> web.Response:
    sim = request.app[_SIM]
    if request.method == "POST":
        try:
            sim.reconfigure(orjson.loads(await request.read()))
        except (orjson.JSONDecodeError, ValueError) as exc:
            return error_response(400, str(exc))
    return json_response(config_json(sim.config))


def create_app(config: SimConfig) -> web.Application:
    """The simulator as an aiohttp application.

    Run it with `handler_cancellation=True` (SimServer and `main` do): aiohttp only notices a
    client that hangs up on a non-streaming request when it may cancel the handler, and a
    request nobody waits for must give its slot back like on a real server.
    """
    sim = Simulator(config)
    app = web.Application(client_max_size=_CLIENT_MAX_SIZE)
    app[_SIM] = sim
    SglangApi(sim).add_routes(app.router)
    OpenAIApi(sim).add_routes(app.router)
    app[_BATCHES] = BatchApi(sim)
    app[_BATCHES].add_routes(app.router)
    app.router.add_get("/metrics", metrics_handler(sim))
    app.router.add_get("/_sim/stats", _sim_stats)
    app.router.add_get("/_sim/config", _sim_config)
    app.router.add_post("/_sim/config", _sim_config)
    app.on_shutdown.append(sim.on_shutdown)
    return app


class SimServer:
    """The simulator on a real socket, as an async context manager for tests, demo and bench."""

    def __init__(self, config: SimConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.url = ""
        self.app = create_app(config)
        self._sim = self.app[_SIM]
        self._runner: web.AppRunner | None = None

    @property
    def config(self) -> SimConfig:
        return self._sim.config

    @config.setter
    def config(self, value: SimConfig) -> None:
        value.validate()
        self._sim.config = value
        self._sim.slots.wake()

    @property
    def stats(self) -> SimStats:
        return self._sim.stats

    @property
    def batches(self) -> BatchApi:
        """The Batch API's state: its batches, files and ledger of custom_ids answered."""
        return self.app[_BATCHES]

    async def start(self) -> str:
        runner = web.AppRunner(
            self.app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            self._sim.begin_shutdown()
            await runner.cleanup()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()
