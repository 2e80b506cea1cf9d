"""`gen-tui sim`: the simulator as a command, its flags mapped onto a SimConfig.

Every flag is checked as it is parsed, so a bad value costs one line on stderr, and a secret
(the /v1 API key) is only ever read from the environment, never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from gen_tui.backends.sim.config import (
    FIRST_TOKEN_ID,
    METRICS_NAMES,
    OPENAI_REASONING,
    OPENAI_STREAM_ENDS,
    Faults,
    LengthProfile,
    SimConfig,
)
from gen_tui.backends.sim.server import SimServer, quiet_bad_requests

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag costs one line on stderr instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probability(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability between 0 and 1, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text!r}")
        return value

    return parse


def _port(text: str) -> int:
    value = _whole(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {text!r}")
    return value


def _profile_arg(text: str) -> tuple[str, LengthProfile]:
    name, sep, spec = text.partition("=")
    mean_text, _, cv_text = spec.partition(":")
    if not sep or not name.strip() or not mean_text:
        raise argparse.ArgumentTypeError(f"expected NAME=MEAN[:CV], got {text!r}")
    try:
        return name.strip(), LengthProfile(
            mean=_positive(mean_text), cv=_non_negative(cv_text) if cv_text else 0.95
        )
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _cost_arg(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT dollars per million tokens, got {text!r}"
        )
    try:
        return _non_negative(parts[0]), _non_negative(parts[1])
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="gen-tui sim",
        description=(
            "Run a simulated SGLang server (native /generate API, and OpenAI's "
            "/v1/chat/completions) for demos and tests."
        ),
        epilog="example:\n  gen-tui sim --port 31555 --slots 128 --tokens-per-s 400 "
        "--profile B2=3800:0.9\n  gen-tui run --server-url http://127.0.0.1:31555 ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    add("--port", type=_port, default=30000, help="port, 0 for any free one (default: 30000)")
    add("--slots", type=_whole(1), default=64, help="concurrent generations (default: 64)")
    add("--tokens-per-s", type=_positive, default=200.0, help="decode speed of one slot")
    add("--prefill-s", type=_non_negative, default=0.0, help="latency before the first token")
    add(
        "--vocab-size",
        type=_whole(FIRST_TOKEN_ID + 1),
        help=(
            "ids below it: others in input_ids are refused, and answers use only these "
            "(give the tokenizer's, so the records verify)"
        ),
    )
    add(
        "--context-length",
        type=_whole(2),
        default=32768,
        help="the model's context in tokens, as /model_info and /v1/models say (default: 32768)",
    )
    add(
        "--profile",
        type=_profile_arg,
        action="append",
        default=[],
        metavar="NAME=MEAN[:CV]",
        help="completion-length profile of the dataset NAME (the rid prefix); repeatable",
    )
    add("--default-mean", type=_positive, default=600.0, help="mean length for other datasets")
    add(
        "--default-cv",
        type=_non_negative,
        default=0.95,
        help="spread of those lengths: standard deviation over mean (default: 0.95)",
    )
    add("--seed", type=_whole(0), default=0, help="random seed: the same answers each start")
    add("--stream-output", action="store_true", help="stream frames carry only the new ids")
    add("--frame-tokens", type=_whole(1), default=8, help="tokens per stream frame")
    add(
        "--model-path",
        default="gen-tui/simulated-model",
        help="the model path /model_info reports (SGLang's --model-path)",
    )
    add(
        "--fail-5xx",
        type=_probability,
        default=0.0,
        metavar="P",
        help="share of 500 or 503 answers",
    )
    add("--fail-429", type=_probability, default=0.0, metavar="P", help="share of 429 (rate limit)")
    add(
        "--retry-after",
        type=_non_negative,
        default=1.0,
        metavar="SECONDS",
        help="the Retry-After a 429 carries (default: 1)",
    )
    add(
        "--fail-timeout",
        type=_probability,
        default=0.0,
        metavar="P",
        help="share of requests that hang without a byte for --hang-s, then are reset",
    )
    add(
        "--hang-s",
        type=_non_negative,
        default=3600.0,
        metavar="SECONDS",
        help="how long such a request hangs (default: 3600)",
    )
    add(
        "--fail-reset",
        type=_probability,
        default=0.0,
        metavar="P",
        help="share of requests whose connection is reset (TCP RST) before any answer",
    )
    add(
        "--fail-torn",
        type=_probability,
        default=0.0,
        metavar="P",
        help="share of answers cut in the middle of their JSON (a torn last frame)",
    )
    add(
        "--fail-midstream",
        type=_probability,
        default=0.0,
        metavar="P",
        help="share of generations that fail half-way (an error frame, or a 500)",
    )
    add("--fail-huge-error", type=_probability, default=0.0, metavar="P", help="1 MiB error")
    add("--fail-402", type=_probability, default=0.0, metavar="P", help="/v1: out of credits")
    add("--model-name", default="sim-model", help="the model /v1/chat/completions serves")
    add("--strict-model", action="store_true", help="/v1: refuse any other model with a 400")
    add(
        "--api-key-env",
        metavar="NAME",
        help="/v1: require `Authorization: Bearer KEY`, KEY read from the environment "
        "variable NAME (never pass a secret on the command line)",
    )
    add(
        "--cost",
        type=_cost_arg,
        metavar="IN,OUT",
        help="/v1: dollars per million input,output tokens, reported as usage.cost",
    )
    add(
        "--openai-stream-end",
        choices=OPENAI_STREAM_ENDS,
        default="done",
        help="/v1: how a stream ends (default: done)",
    )
    add("--openai-keepalive", action="store_true", help="/v1: open streams with an SSE comment")
    add(
        "--reasoning",
        choices=OPENAI_REASONING,
        default="none",
        help="/v1: a thinking model: the first half of each answer is reasoning, sent in "
        "this shape (default: none)",
    )
    add(
        "--kv-tokens",
        type=_whole(1),
        help="the KV cache in tokens: past it, requests are retracted and recomputed",
    )
    add(
        "--metrics",
        choices=METRICS_NAMES,
        default="sglang",
        help="GET /metrics in SGLang's Prometheus names (as with --enable-metrics), vLLM's, "
        "or off (404, as SGLang without the flag) (default: sglang)",
    )
    return parser


def _config_from_args(args: argparse.Namespace) -> SimConfig:
    api_key = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(
                f"--api-key-env: the environment variable {args.api_key_env} is not set or empty"
            )
    config = SimConfig(
        slots=args.slots,
        tokens_per_s=args.tokens_per_s,
        prefill_s=args.prefill_s,
        vocab_size=args.vocab_size,
        context_length=args.context_length,
        profiles=dict(args.profile),
        default_profile=LengthProfile(mean=args.default_mean, cv=args.default_cv),
        faults=Faults(
            error_5xx=args.fail_5xx,
            rate_429=args.fail_429,
            retry_after_s=args.retry_after,
            timeout=args.fail_timeout,
            hang_s=args.hang_s,
            reset=args.fail_reset,
            torn_json=args.fail_torn,
            stream_error=args.fail_midstream,
            payment_402=args.fail_402,
            huge_error=args.fail_huge_error,
        ),
        seed=args.seed,
        stream_output=args.stream_output,
        frame_tokens=args.frame_tokens,
        model_path=args.model_path,
        model_name=args.model_name,
        strict_model=args.strict_model,
        api_key=api_key,
        cost_per_million=args.cost,
        openai_stream_end=args.openai_stream_end,
        openai_keepalive=args.openai_keepalive,
        openai_reasoning=args.reasoning,
        metrics=args.metrics,
        kv_tokens=args.kv_tokens,
    )
    config.validate()
    return config


async def _serve(config: SimConfig, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    quiet_bad_requests()
    server = SimServer(config, host, port)
    await server.start()
    try:
        print(f"listening on {server.url}", flush=True)
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """`gen-tui sim`: serve until SIGINT/SIGTERM; the first stdout line names the URL."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        config = _config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        asyncio.run(_serve(config, args.host, args.port))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(
            f"{parser.prog}: error: cannot listen on {args.host}:{args.port}: {reason}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        pass
    return 0
