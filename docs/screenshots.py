"""Makes the docs' pictures again: the panel on the demo, and the report of that demo's run.

Run it from a clone, after `./dev.sh demo` or `./dev.sh test` made .venv:

    .venv/bin/python docs/screenshots.py

It runs the demo under Textual's Pilot (as tests/tui do) in a 120x40 terminal until
B2_opencodeinstruct has reached its budget, and saves the screen as docs/images/panel.svg,
then the table view of the same moment sorted by state (`t`, `o`) as docs/images/table.svg.
Then it runs `gen-tui report --html` on that demo's output folder, and, when chromium is
installed (`apt-get install chromium`), saves the page as docs/images/report.png. Without
chromium it says so and leaves the old PNG. It took 75 to 80 s here (4 December 2026).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gen_tui.app.cli.launch import demo_app
from gen_tui.widgets.dataset_panel import DatasetPanel

IMAGES = Path(__file__).resolve().parent / "images"
SIZE = (120, 40)
"""Roomy panels (charts) and the event log for nine datasets; 80x24 fits them compact."""
WAIT_S = 240.0
"""How long to wait for B2 to reach its budget (about a minute on an idle machine)."""
REPORT_WIDTH = 1200


async def panel(root: Path) -> None:
    """The demo's panel once B2 is done, saved as images/panel.svg, and its table view as
    images/table.svg."""
    app = demo_app(root)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + WAIT_S
        while not b2_done(app):
            if time.monotonic() > deadline:
                raise SystemExit(f"B2 did not reach its budget in {WAIT_S:.0f} s")
            await pilot.pause(1.0)
        await pilot.pause(2.0)  # a few more frames: rates and the event log settle
        app.save_screenshot("panel.svg", str(IMAGES))
        await pilot.press("t", "o")  # the table view, sorted by state
        await pilot.pause(1.0)
        app.save_screenshot("table.svg", str(IMAGES))


def b2_done(app: object) -> bool:
    for widget in app.query(DatasetPanel):  # type: ignore[attr-defined]
        snapshot = widget.view.snapshot if widget.view else None
        if snapshot is not None and snapshot.name.startswith("B2"):
            return str(snapshot.state) == "done"
    return False


def report(root: Path) -> None:
    """`gen-tui report --html` of the demo's output, as images/report.png through chromium."""
    page = root / "report.html"
    gen_tui = Path(sys.executable).with_name("gen-tui")
    output = root / "output"
    subprocess.run([gen_tui, "report", "--output-dir", output, "--html", page], check=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: docs/images/report.png left as it was", file=sys.stderr)
        return
    subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--screenshot={IMAGES / 'report.png'}", f"--window-size={REPORT_WIDTH},2150",
            page.as_uri(),
        ],
        check=True, capture_output=True,
    )  # fmt: skip


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gen-tui-shots-") as tmp:
        asyncio.run(panel(Path(tmp)))
        report(Path(tmp))
    for name in ("panel.svg", "report.png"):
        path = IMAGES / name
        if path.exists():
            print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
