"""Requests a fleet may move to another lane while they run: the seam between the runner,
which sends each attempt, and the deadline's watch (overtime.py), which decides.

Why a move and not a second copy (a hedge): the first answer back would have to be chosen
and the other thrown away after its tokens were counted in flight twice; a move keeps one
attempt alive at a time, so the budget counts the request once and the sink writes it once,
exactly as a retry does. What the slow lane had made of it is lost: a free lane's time,
never money (only a free lane's requests are moved: a priced one's would be paid twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Generic, Protocol, TypeVar

from gen_tui.backends.clients.results import Generation


class Lane(Protocol):
    """Where an attempt is moved to: a server whose slot the mover took for it. (A
    protocol, not the runner's `Server`: the runner imports this module.)"""

    def give_back(self) -> None:
        """The slot taken for the move, free again (the move was not made)."""


L = TypeVar("L", bound=Lane)


class Moves(Generic[L]):
    """The attempts that can be moved now (by rid), and the calling off of one."""

    def __init__(self) -> None:
        self._open: dict[str, asyncio.Future[L]] = {}

    def open(self, rid: str) -> asyncio.Future[L]:
        """`rid`'s attempt may be moved from now until `close`."""
        moved: asyncio.Future[L] = asyncio.get_running_loop().create_future()
        self._open[rid] = moved
        return moved

    def close(self, rid: str) -> None:
        self._open.pop(rid, None)

    def __contains__(self, rid: str) -> bool:
        moved = self._open.get(rid)
        return moved is not None and not moved.done()

    def move(self, rid: str, to: L) -> bool:
        """Call `rid`'s attempt off for `to` (whose slot the caller has taken): False when
        it has ended or been moved already."""
        moved = self._open.get(rid)
        if moved is None or moved.done():
            return False
        moved.set_result(to)
        return True

    @staticmethod
    async def unless_moved(
        attempt: Awaitable[Generation], moved: asyncio.Future[L]
    ) -> Generation | L:
        """`attempt`'s answer, or, if `moved` comes first, the lane it was moved to (its
        slot taken for the next attempt): the attempt is then cancelled (its stream
        closed: the server frees its slot). A move that comes with the answer gives back
        the slot it took."""
        task = asyncio.ensure_future(attempt)
        try:
            await asyncio.wait((task, moved), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            _give_back(moved)
            raise
        if task.done():
            _give_back(moved)
            return task.result()
        task.cancel()
        try:
            await asyncio.gather(task, return_exceptions=True)
        except BaseException:
            _give_back(moved)
            raise
        return moved.result()


def _give_back(moved: asyncio.Future[L]) -> None:
    """A move that will not be made: the slot it took on its lane is free again."""
    if moved.done() and not moved.cancelled():
        moved.result().give_back()
    else:
        moved.cancel()
