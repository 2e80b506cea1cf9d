"""`gen-tui report --html` loaded in a real browser engine (headless Chromium), where one is
installed (.ci/run installs it): the page stands alone and draws what the report says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.run_output import copy_run, gen_tui

BROWSER = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome")
        if (found := shutil.which(name))
    ),
    None,
)

pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium here (.ci/run installs the `chromium` package)"
)


def _browser(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert BROWSER is not None
    return subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *args],
        capture_output=True,
        timeout=90,
        check=False,
    )


def test_the_report_page_renders_in_a_browser(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    page = tmp_path / "report.html"
    done = gen_tui("report", "--output-dir", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr.decode()

    dom = _browser("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    text = dom.stdout.decode()
    # What the browser built, not what the file says: four charts (tokens, throughput and a
    # histogram per dataset), a line per dataset in each time chart, both datasets' rows.
    assert len(re.findall(r"<svg\b", text)) == 4
    assert len(re.findall(r"<path\b", text)) >= 4
    assert len(re.findall(r"<rect\b", text)) > 8  # the histograms' bars
    rows = re.findall(r"<tr><td>([^<]*)</td>", text)
    assert rows[:2] == ["A", "B"]
    # It stands alone: nothing to run, nothing to fetch.
    assert "<script" not in text
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", text)

    shot = tmp_path / "report.png"
    done = _browser(
        "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri()
    )
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
