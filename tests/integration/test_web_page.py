"""The coordinator's web page (seed 004's GUI) in a real browser: Debian's
chromium, driven by its chromedriver, loads the page of a running cluster
(examples/replacement-chain.yaml), which follows it live over Server-Sent
Events. The test reads what the page shows: the sites and links of the
topology with the nodes standing at each, the stages with their replicas,
the network usage, and the re-placement's migration as it happens; then
it saves a screenshot (SEMIACTIVE_WEB_SCREENSHOT=PATH copies it there, as
docs/results/web-page.png was made). An ordinary cluster (no ``network:``
block) shows no network panel, and rows/s per edge and the sink's latency
over time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def rows_of(browser: object, table: str = "stages") -> list[str]:
    """A table's rows, each row's cells joined by |."""
    script = (
        "return [...document.querySelectorAll(`#${arguments[0]} tbody tr`)]"
        ".map(r => [...r.cells].map(c => c.textContent).join('|'))"
    )
    return list(browser.execute_script(script, table))  # type: ignore[attr-defined]


@contextmanager
def page_of(config: Path, run_dir: Path, duration: float) -> Iterator[Any]:
    """A browser on the live page of ``cluster up CONFIG``; the run must
    end well (exit 0, nothing left running)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1300,1200")
    # The browser first: on a loaded machine it takes seconds to start,
    # which the run would spend without it.
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or ""), options=options)
    launcher, err = None, ""
    try:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "semiactive", "cluster", "up", str(config),
             "--duration", str(duration), "--run-dir", str(run_dir), "--quiet"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        browser.get(f"http://127.0.0.1:{_http_port(run_dir)}/")
        yield browser
    finally:
        browser.quit()
        try:
            if launcher is not None:
                err = launcher.communicate(timeout=60)[1]
        finally:
            if launcher is not None and launcher.poll() is None:
                launcher.kill()
                launcher.wait()
    assert_no_processes(str(run_dir))
    assert launcher.returncode == 0, err


def reader(browser: Any) -> Callable[..., list[str]]:
    """``shown(selector, attribute="")``: the text (or an attribute) of
    every match. The page redraws on every snapshot: read it in one
    script, never by element handles."""

    def shown(selector: str, attribute: str = "") -> list[str]:
        script = (
            "return [...document.querySelectorAll(arguments[0])]"
            ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent)"
        )
        return list(browser.execute_script(script, selector, attribute))

    return shown


def test_the_page_shows_the_cluster_and_its_migration_live(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = ROOT / "examples" / "replacement-chain.yaml"
    with page_of(config, run_dir, 10) as browser:
        shown = reader(browser)
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
        assert browser.execute_script("return document.getElementById('network-row').hidden") is False
        screenshot = tmp_path / "web-page.png"
        assert browser.save_screenshot(str(screenshot))
        if os.environ.get("SEMIACTIVE_WEB_SCREENSHOT"):
            shutil.copy(screenshot, os.environ["SEMIACTIVE_WEB_SCREENSHOT"])
    assert screenshot.stat().st_size > 10_000


def test_an_ordinary_cluster_shows_rows_and_latency_and_no_network_panel(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = ROOT / "examples" / "paper-chain-ha.yaml"  # no network: block
    with page_of(config, run_dir, 8) as browser:
        shown = reader(browser)

        def rows_per_s() -> dict[str, float]:
            return {
                cells[0]: float(cells[3])
                for cells in (r.split("|") for r in rows_of(browser, "edges"))
                if len(cells) > 3
            }

        wait_until(
            lambda: rows_per_s().get("select-2->select-3", 0) > 0 and len(shown("#latency polyline")) > 0,
            what="rows/s on the edges and a latency series",
            timeout=30,
            interval=0.3,
        )
        rates = rows_per_s()
        assert set(rates) == {
            "node-0->select-1",
            "select-1->select-2",
            "select-2->select-3",
            "select-3->sink",
        }
        assert all(v > 0 for v in rates.values()), rates
        assert set(shown("#rates polyline", "data-series")) == set(rates)
        assert shown("#latency polyline", "data-series")[0] == "sink"
        assert any(t.startswith("sink: ") and t.endswith(" ms") for t in shown("#latency-legend span"))
        assert browser.execute_script("return document.getElementById('network-row').hidden") is True
        assert not browser.find_element("id", "map").is_displayed()
        assert not browser.find_element("id", "usage").is_displayed()
        screenshot = tmp_path / "web-page-plain.png"
        assert browser.save_screenshot(str(screenshot))
        if os.environ.get("SEMIACTIVE_WEB_SCREENSHOT_PLAIN"):
            shutil.copy(screenshot, os.environ["SEMIACTIVE_WEB_SCREENSHOT_PLAIN"])
