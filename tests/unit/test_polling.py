"""The one polling helper: it returns what the check found, and a timeout names the wait."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.polling import wait_until, wait_until_sync


async def test_returns_the_first_truthy_value_of_the_check() -> None:
    calls = iter([0, None, [], "found"])
    assert await wait_until(lambda: next(calls), 5, "the fourth answer", interval=0.001) == "found"


async def test_a_timeout_names_what_was_awaited_and_the_detail() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0\.2 s: the run's end\nstill 3 left"):
        await wait_until(lambda: False, 0.2, "the run's end", detail=lambda: "still 3 left")
    assert 0.2 <= time.monotonic() - started < 5


async def test_an_unnamed_wait_is_named_by_its_own_source() -> None:
    records = 0
    with pytest.raises(AssertionError, match=r"lambda: records >= 40"):
        await wait_until(lambda: records >= 40, 0.05)


async def test_the_pause_given_runs_between_polls() -> None:
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await asyncio.sleep(0)

    answers = iter([False, False, True])
    await wait_until(lambda: next(answers), 5, "the third poll", interval=0.01, pause=pause)
    assert pauses == [0.01, 0.01]


def test_the_sync_form_times_out_the_same_way_and_lets_a_check_fail_early() -> None:
    with pytest.raises(AssertionError, match=r"not within 0\.1 s: nothing"):
        wait_until_sync(lambda: None, 0.1, "nothing")

    def check() -> bool:
        raise AssertionError("the run exited")

    with pytest.raises(AssertionError, match="the run exited"):
        wait_until_sync(check, 30, "records")
    assert wait_until_sync(lambda: 7, 1, "seven") == 7
