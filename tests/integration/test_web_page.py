"""The coordinator's web page (the placement paper's GUI) in a real browser: Debian's
chromium, driven by its chromedriver, loads the page of a running cluster
(examples/replacement-chain.yaml), which follows it live over Server-Sent
Events. The test reads what the page shows: the sites and links of the
topology with the nodes standing at each, the stages with their replicas,
the network usage, and the re-placement's migration as it happens; then
it saves a screenshot (SEMIACTIVE_WEB_SCREENSHOT=PATH copies it there, as
docs/results/web-page.png was made)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.processes import ROOT, assert_no_processes
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None or shutil.which("chromedriver") is None,
        reason="chromium and chromedriver not installed: `make chromium` installs Debian's (as root)",
    ),
]


def _http_port(run_dir: Path) -> int:
    return wait_until(
        lambda: _serving(run_dir),
        what="the coordinator's web page",
        timeout=60,
        interval=0.3,
        ignoring=(OSError, ValueError, KeyError, StopIteration),
    )


def _serving(run_dir: Path) -> int:
    """The coordinator's HTTP port, once it answers there."""
    doc = json.loads((run_dir / "cluster.json").read_text())
    port = next(p["ports"]["http"] for p in doc["processes"] if p["role"] == "coordinator")
    urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=2).read()
    return int(port)


def rows_of(browser: object) -> list[str]:
    """The stages table, each row's cells joined by |."""
    script = (
        "return [...document.querySelectorAll('#stages tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent).join('|'))"
    )
    return list(browser.execute_script(script))  # type: ignore[attr-defined]


def test_the_page_shows_the_cluster_and_its_migration_live(tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    run_dir = tmp_path / "run"
    config = ROOT / "examples" / "replacement-chain.yaml"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "semiactive", "cluster", "up", str(config),
         "--duration", "10", "--run-dir", str(run_dir), "--quiet"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1300,1200")
    browser = None
    try:
        port = _http_port(run_dir)
        browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or ""), options=options)
        browser.get(f"http://127.0.0.1:{port}/")

        # The page redraws on every snapshot: read it in one script, never by element handles.
        def shown(selector: str, attribute: str = "") -> list[str]:
            assert browser is not None
            script = (
                "return [...document.querySelectorAll(arguments[0])]"
                ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent)"
            )
            return list(browser.execute_script(script, selector, attribute))

        events = wait_until(
            lambda: shown("#events li"),
            until=lambda events: any(" migrated " in t for t in events),
            what="a migration on the page",
            timeout=30,
            interval=0.3,
        )
        assert any("replacement stage=join-1 target=spare-east" in t for t in events), events
        assert any(" migrated stage=join-1 source=node-1 target=spare-east" in t for t in events), events

        def placement() -> tuple[list[str], float]:
            """join-1's row and the network usage u the page shows."""
            return [r for r in rows_of(browser) if r.startswith("join-1|")], float(shown("#usage")[0])

        # The snapshots after the migration: the new placement and its u.
        wait_until(
            placement,
            until=lambda seen: (
                [r.split("|")[1:4] for r in seen[0]] == [["stage", "sas", "spare-east@east"]]
                and seen[1] < 100
            ),
            what="the page to show join-1 on spare-east and the usage of the new placement",
            timeout=10,
            interval=0.3,
            ignoring=(ValueError, IndexError),  # no usage shown yet
        )
        assert shown("#cluster") == ["replacement-chain"]
        rows = {cells[0]: cells for cells in (row.split("|") for row in rows_of(browser))}
        assert rows["join-1"][1:4] == ["stage", "sas", "spare-east@east"], rows
        assert rows["sum-2"][3] == "node-3@east", rows
        assert float(shown("#usage")[0]) < 100  # all on the east coast now
        assert set(shown("#map circle", "data-site")) == {"east", "hub", "west"}
        assert set(shown("#map line", "data-link")) == {"east|hub", "hub|west"}
        labels = dict(zip(shown("#map text", "data-node"), shown("#map text"), strict=True))
        assert labels["spare-east"] == "spare-east join-1" and labels["quotes"] == "quotes"
        assert len(shown("#history polyline")) == 1
        screenshot = tmp_path / "web-page.png"
        assert browser.save_screenshot(str(screenshot))
        if os.environ.get("SEMIACTIVE_WEB_SCREENSHOT"):
            shutil.copy(screenshot, os.environ["SEMIACTIVE_WEB_SCREENSHOT"])
    finally:
        if browser is not None:
            browser.quit()
        try:
            launcher.communicate(timeout=60)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
    assert_no_processes(str(run_dir))
    assert launcher.returncode == 0
    assert screenshot.stat().st_size > 10_000
