"""The gap report in a real headless Chromium, driven over the Chrome DevTools Protocol (websocket-client).

The page must load with no console error, no exception and no request other than itself and ``data:`` URIs; every
figure must decode; a full-page screenshot is saved in the test's tmp dir. CI installs Debian's ``chromium``: a
missing browser fails the test, it does not skip it.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from gapbench.products.report_build import build_report

from test_report import TASK

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no chromium on PATH: install it with `apt-get update && apt-get install -y chromium` "
                "(CI's .ci/run does), then re-run this test.", pytrace=False)


class Browser:
    """A headless Chromium and one page, with the events the page produced."""

    def __init__(self, profile: Path) -> None:
        import websocket

        self.proc = subprocess.Popen([chromium_path(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(f"chromium did not start (exit code {self.proc.returncode}).", pytrace=False)
            time.sleep(0.1)
        port, path = port_file.read_text().split()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)

    def send(self, method: str, session: bool = False, **params) -> dict:
        msg_id = next(self.ids)
        msg = {"id": msg_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev["method"] == method:
                    return ev
            seen = len(self.events)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            reply = json.loads(self.ws.recv())
            if "method" in reply:
                self.events.append(reply)

    def load(self, url: str) -> None:
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        time.sleep(0.5)  # late console messages or requests
        self.send("Runtime.evaluate", session=True, expression="1")  # drains events that arrived meanwhile

    def evaluate(self, expression: str):
        out = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(out["exceptionDetails"])
        return out["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        metrics = self.send("Page.getLayoutMetrics", session=True)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=1100,
                  height=min(int(size["height"]) + 1, 16000), deviceScaleFactor=1, mobile=False)
        shot = self.send("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def problems(self) -> list[str]:
        out = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif ev["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
            elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif ev["method"] == "Network.loadingFailed":
                out.append(f"request failed: {p.get('errorText')}")
        return out

    def requests(self) -> list[str]:
        return [ev["params"]["request"]["url"] for ev in self.events if ev["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def browser(tmp_path):
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path))
    b = Browser(profile)
    yield b
    b.close()


def foreign(requests: list[str], page: str) -> list[str]:
    return [u for u in requests if u != page and not u.startswith("data:")]


@pytest.mark.slow
def test_report_page_in_chromium(browser, tmp_path, report_inputs):
    inputs = report_inputs  # test_report.py's build_inputs, built once in the session (tests/fx_report.py)
    dirs = [inputs["gap"], *(inputs[k] for k in ("coverage", "signals", "argus_audit", "argus_compare", "blindspots"))]
    report = build_report(TASK, inputs["runs"], dirs)
    paths = report.save(tmp_path / "report")
    page = paths["html"].resolve().as_uri()
    browser.load(page)
    assert browser.problems() == []
    assert page in browser.requests()
    assert foreign(browser.requests(), page) == []
    # every figure decoded by the browser, every section laid out
    images = browser.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) == len(report.figure_blocks()) == len(report.figures) > 5
    assert all(ok and w >= 200 and h >= 100 for ok, w, h in images)
    titles = browser.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
    assert titles == [s.title for s in report.sections]
    assert browser.evaluate("document.querySelector('#gap table caption').textContent").startswith("Verification-gap bounds")
    shot = browser.screenshot(tmp_path / "report.png")
    assert shot.stat().st_size > 50_000
    keep = os.environ.get("GAPBENCH_REPORT_SCREENSHOT")
    if keep:  # for a person to look at
        shutil.copy(shot, keep)


def test_the_checks_catch_outside_requests_and_console_errors(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   '<script>console.error("broken")</script></body></html>')
    page = bad.resolve().as_uri()
    browser.load(page)
    assert foreign(browser.requests(), page) == ["http://127.0.0.1:9/x.png"]
    assert any("broken" in p for p in browser.problems())
