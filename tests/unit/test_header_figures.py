"""The header's totals give up a decimal before the demo's note or the servers' figures.

Seen in a fresh-clone CI rehearsal on a fast machine: at 80 columns the demo's
"budgets 50%: slow machine" was cut to "budgets 50%…" beside `10.62M tok  931.88k tok/s`, and
at 120 columns the servers' figures were dropped beside `557.68k tok/s`.
"""

from gen_tui.backends.figures import format_count
from gen_tui.widgets.header import HeaderView, fit_parts, parts_of

# " gen-tui " + " " + " RUNNING ": what RunHeader.render draws before the parts.
BEFORE_PARTS = 19


def drawn(view: HeaderView, width: int) -> str:
    return "  ".join(fit_parts(parts_of(view), width - BEFORE_PARTS))


def test_three_significant_digits() -> None:
    assert [format_count(v, digits=3) for v in (931_880, 10_620_000, 602_900, 1_500, 999)] == [
        "932k",
        "10.6M",
        "603k",
        "1.5k",
        "999",
    ]
    assert format_count(931_880) == "931.88k"


def test_at_80_columns_the_note_stays_whole_beside_fast_figures() -> None:
    note = "budgets 50%: slow machine"
    view = HeaderView(state="running", tokens=10_620_000, tok_s=931_880, done=0, total=9, note=note)
    line = drawn(view, 80)
    assert note in line and "tok/s" in line and "done 0/9" in line, line


def test_at_120_columns_the_servers_figures_stay_beside_the_note() -> None:
    view = HeaderView(
        state="running",
        tokens=602_900,
        tok_s=557_680,
        done=0,
        total=9,
        inflight=128,
        concurrency=160,
        utilisation=0.92,
        server_running=92,
        server_queued=0,
        note="budgets 15%: slow machine",
    )
    line = drawn(view, 120)
    assert "budgets" in line and "in flight 128/160" in line, line
    assert "(srv 92 run · 0 q · 36 transit)" in line, line


def test_with_room_the_figures_keep_their_decimals() -> None:
    view = HeaderView(state="running", tokens=10_620_000, tok_s=931_880, done=0, total=9)
    assert "10.62M tok  931.88k tok/s" in drawn(view, 200)
