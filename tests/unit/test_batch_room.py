"""A batch's size from the length model (issue 33): within the budget with a margin for the
spread of what is in flight, tapering as the budget nears."""

from __future__ import annotations

from gen_tui.backends.budget.expected import ExpectedLengths, batch_room
from gen_tui.backends.budget.lengths import InFlight


def test_the_first_wave_fits_even_at_the_cap() -> None:
    expected = ExpectedLengths(4096)
    room = batch_room(10_000_000, 0, expected, [], 4096, 50_000)
    assert room == 10_000_000 // 4096  # every answer at its cap fits, and no more


def test_waves_taper_and_stop_with_nothing_left() -> None:
    expected = ExpectedLengths(4096)
    for _ in range(2000):
        expected.observe(600)
    sizes = []
    tokens = 0
    while True:
        room = batch_room(1_000_000, tokens, expected, [], 4096, 50_000)
        if room == 0:
            break
        sizes.append(room)
        tokens += room * 600
    assert sizes == sorted(sizes, reverse=True) and len(sizes) > 2
    assert tokens <= 1_000_000
    assert batch_room(1_000_000, 1_000_000, expected, [], 4096, 50_000) == 0


def test_what_is_in_flight_takes_its_room() -> None:
    expected = ExpectedLengths(4096)
    for _ in range(2000):
        expected.observe(500)
    alone = batch_room(200_000, 0, expected, [], 4096, 50_000)
    inflight = [InFlight(0.0, 4096) for _ in range(200)]
    beside = batch_room(200_000, 0, expected, inflight, 4096, 50_000)
    assert 0 < beside < alone - 150  # those in flight count at the cap's prior, not 500
    assert batch_room(200_000, 0, expected, [], 4096, 10) == 10  # the provider's limit
