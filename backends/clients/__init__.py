"""Inference clients: how the engine talks to a server, one class per API.

`base.InferenceClient` is the interface; `sglang.SGLangClient` and
`openai_api.OpenAIClient` speak HTTP; `scripted.ScriptedClient` answers tests in memory.
"""

from __future__ import annotations

from gen_tui.backends.clients.base import InferenceClient, Request
from gen_tui.backends.clients.batch import BatchClient
from gen_tui.backends.clients.fleet import FleetClient
from gen_tui.backends.clients.limits import Limits
from gen_tui.backends.clients.openai_api import OpenAIClient
from gen_tui.backends.clients.sglang import SGLangClient
from gen_tui.backends.config.run import EngineConfig, resolve_api_key

__all__ = [
    "BatchClient",
    "FleetClient",
    "InferenceClient",
    "OpenAIClient",
    "Request",
    "SGLangClient",
    "client_for",
]


def client_for(config: EngineConfig) -> InferenceClient:
    """The client for `config.api`, or for each lane of a mixed fleet (`--lane`, each with
    its own API; the batch lane's `BatchClient` is `FleetClient.api(its URL)`, entered with
    the others): the one place the engine's API setting is read."""
    if config.lanes:
        made: dict[str, InferenceClient] = {}
        for api in {lane.api for lane in config.fleet}:
            made[api] = _client(config, api)
        return FleetClient({lane.url: made[lane.api] for lane in config.fleet})
    return _client(config, config.api)


def _client(config: EngineConfig, api: str) -> InferenceClient:
    api_key, key_hint = resolve_api_key(config)
    limits = Limits.for_sampling(config.sampling, config.idle_timeout_s)
    if api in ("openai", "openai-batch"):
        kind = BatchClient if api == "openai-batch" else OpenAIClient
        return kind(
            config.sampling,
            model=config.model,
            api_key=api_key,
            key_hint=key_hint,
            stream=config.stream,
            timeout_s=config.request_timeout_s,
            limits=limits,
            sim_dataset_header=config.hooks.sim_dataset_header,
        )
    # The key is not sent to SGLang; it is still kept out of every reason written down.
    return SGLangClient(
        config.sampling,
        stream=config.stream,
        timeout_s=config.request_timeout_s,
        secret=api_key,
        limits=limits,
    )
