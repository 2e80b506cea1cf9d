"""Fixtures of the integration tests alone (the ones every kind shares are in tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from tests.support.slurm import Cluster, cancel_jobs


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain aiohttp client, for tests that speak a server's protocol by hand."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def prefix(slurm: Cluster) -> Iterator[str]:
    """A prefix for a Slurm test's recipe names: its jobs, cancelled after it (others'
    kept)."""
    name = f"t{uuid.uuid4().hex[:6]}-"
    yield name
    cancel_jobs(name)
