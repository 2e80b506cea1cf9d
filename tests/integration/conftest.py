"""Fixtures of the integration tests alone (the ones every kind shares are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain aiohttp client, for tests that speak a server's protocol by hand."""
    async with aiohttp.ClientSession() as session:
        yield session
