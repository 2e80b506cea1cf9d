"""A server's health check: its `/health` (or the recipe's path) answering 200 in time.

SGLang answers 503 while it starts or shuts down and 200 once its scheduler is up; vLLM and
the simulator answer 200 when ready; a router answers 200 whatever its workers do (its
workers are checked one by one). Nothing from the body is used: the status code is all.
"""

from __future__ import annotations

import asyncio

import aiohttp

HEALTH_TIMEOUT_S = 5.0


async def check_health(
    session: aiohttp.ClientSession, url: str, timeout_s: float = HEALTH_TIMEOUT_S
) -> str | None:
    """None when `url` answers 200 within `timeout_s`; otherwise why not, in a few words."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as answer:
            if answer.status == 200:
                return None
            return f"{url} answered {answer.status}"
    except TimeoutError:
        return f"{url} did not answer within {timeout_s:g} s"
    except (aiohttp.ClientError, OSError) as exc:
        return f"{url}: {type(exc).__name__}"
    except asyncio.CancelledError:
        raise
