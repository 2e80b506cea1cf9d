"""The link chaos scenario's check of what a HostMonitor reports: every total it sends, held
against a recount of the record file's bytes at the offset the total names.

Kept out of the scenario (test_link_chaos.py) so that the scenario reads as the steps a person
takes; the recount itself is checker.py's, which uses no backends code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gen_tui.backends.hosts import DatasetTotals

from .checker import CheckFailed, prefix_counts
from .link import RAW


class TotalsAudit:
    """The totals a monitor sent for each dataset, and the checks of them so far.

    A total must equal a recount of the file up to its byte offset (or that plus the next
    line, counted provisionally), and no total may go backwards; the bytes once on disk must
    stay as they were. `totals_checked` and `records_checked` are the figures the chaos
    report gives; the scenario adds the records of its final folder check to the latter.
    """

    def __init__(self, out: Path, datasets: tuple[str, ...], seed: int) -> None:
        self.out = out
        self.datasets = datasets
        self.seed = seed  # named in every failure, to replay it
        self.received: dict[str, list[DatasetTotals]] = {name: [] for name in datasets}
        self.verified = {name: b"" for name in datasets}
        self.checked = {name: 0 for name in datasets}
        self.totals_checked = 0
        self.records_checked = 0

    def receive(self, totals: Mapping[str, DatasetTotals]) -> None:
        """Note each dataset's total that differs from the last one noted (the monitor's
        on_change: it hands over a new object for every new total)."""
        for name, total in totals.items():
            seen = self.received.get(name)
            if seen is not None and (not seen or seen[-1] is not total):
                seen.append(total)

    def verify(self, label: str) -> None:
        """Every total received since the last call, against a recount of the file's bytes."""
        received, verified, checked, seed = self.received, self.verified, self.checked, self.seed
        for name in self.datasets:
            path = self.out / name / RAW
            data = path.read_bytes() if path.exists() else b""
            if not data.startswith(verified[name]):
                raise CheckFailed(f"{label}: {path}: bytes once on disk changed or vanished")
            verified[name] = data
            items = received[name]
            previous = items[checked[name] - 1] if checked[name] else None
            counts = prefix_counts(data, str(path))
            for totals in items[checked[name] :]:
                if totals.offset not in counts:
                    raise CheckFailed(f"{label}: {name}: offset {totals.offset} is no line end")
                records, tokens, following = counts[totals.offset]
                exact = (totals.samples, totals.tokens) == (records, tokens)
                provisional = following is not None and (totals.samples, totals.tokens) == (
                    records + 1,
                    tokens + following.tokens,
                )
                assert exact or provisional, (
                    f"{label}: {name} total {totals.samples} records/{totals.tokens} tokens at "
                    f"offset {totals.offset}, but the file holds {records}/{tokens} there "
                    f"(seed {seed})"
                )
                if previous is not None:
                    backwards = totals.samples < previous.samples or totals.tokens < previous.tokens
                    assert not backwards, (
                        f"{label}: {name} total went backwards: {previous.samples}/"
                        f"{previous.tokens} -> {totals.samples}/{totals.tokens} (seed {seed})"
                    )
                previous = totals
                self.totals_checked += 1
            checked[name] = len(items)
            self.records_checked += counts[max(counts)][0]
