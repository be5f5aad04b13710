"""Headless Chromium for the report tests, driven over the DevTools protocol.

``ensure_chromium`` finds a Chromium or installs Debian's package; ``load_page`` opens one
local HTML file, records what a reader's browser would complain about (console errors and
warnings, uncaught exceptions, every request that leaves the file) and writes a screenshot.
Only the ``websockets`` package is used, which the project already depends on through
Prefect.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
ENV_BROWSER = "HORIZONBENCH_CHROMIUM"  # an explicit browser binary wins over the PATH
INSTALL_HINT = (
    "install Debian's package (`apt-get install -y --no-install-recommends chromium`, as root) "
    f"or point {ENV_BROWSER} at a Chromium binary"
)
LAPTOP = (1366, 900)
LAUNCH_ATTEMPTS = 3


def find_chromium() -> str | None:
    explicit = os.environ.get(ENV_BROWSER)
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _apt(args: list[str], timeout: float) -> tuple[bool, str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        done = subprocess.run(
            ["apt-get", *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return False, f"`apt-get {' '.join(args)}` took more than {timeout:.0f} s"
    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return done.returncode == 0, tail


def ensure_chromium(install_timeout: float = 600, update_timeout: float = 300) -> tuple[str | None, str]:
    """(path to a Chromium, "") or (None, why it could not be had).

    When none is on the PATH, Debian's ``chromium`` is installed with apt-get; when that
    fails (often because the package lists were never fetched) ``apt-get update`` runs and
    the install is tried once more.
    """
    found = find_chromium()
    if found:
        return found, ""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, "no Chromium on the PATH and not running as root, so apt-get cannot install one"
    if shutil.which("apt-get") is None:
        return None, "no Chromium on the PATH and no apt-get to install Debian's package"
    install = ["install", "-y", "--no-install-recommends", "chromium"]
    ok, why = _apt(install, install_timeout)
    if not ok:
        updated, why_update = _apt(["update"], update_timeout)
        if not updated:
            return None, f"`apt-get install chromium` failed ({why}), and `apt-get update` too ({why_update})"
        ok, why = _apt(install, install_timeout)
    found = find_chromium()
    if not ok or not found:
        return None, f"`apt-get install chromium` failed: {why}"
    return found, ""


@dataclass
class PageReport:
    """What the browser saw while loading one page."""

    url: str
    console: list[str] = field(default_factory=list)  # console errors and warnings, "level: text"
    exceptions: list[str] = field(default_factory=list)  # uncaught exceptions
    failed_loads: list[str] = field(default_factory=list)  # the browser's network error log lines
    requests: list[str] = field(default_factory=list)  # URLs requested beyond the file and data:
    values: dict[str, Any] = field(default_factory=dict)  # results of the expressions asked for
    screenshot: Path | None = None


class DevTools:
    """One flat-session DevTools connection: commands wait for their answer, events queue."""

    def __init__(self, ws_url: str, timeout: float) -> None:
        # a local socket: never through an HTTP proxy from the environment; screenshots are big
        self.ws = connect(ws_url, proxy=None, max_size=None, open_timeout=timeout)
        self.timeout = timeout
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        msg_id = next(self.ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._recv(deadline, f"an answer to {method}")
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, within: float) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        deadline = time.monotonic() + within
        while True:
            event = self._recv(deadline, method)
            self.events.append(event)
            if event.get("method") == method:
                return

    def drain(self, quiet: float) -> None:
        """Keep reading events until none came for ``quiet`` seconds."""
        while True:
            try:
                self.events.append(json.loads(self.ws.recv(timeout=quiet)))
            except TimeoutError:
                return

    def _recv(self, deadline: float, waiting_for: str) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Chromium sent no {waiting_for} within {self.timeout:.0f} s")
        try:
            return json.loads(self.ws.recv(timeout=left))
        except TimeoutError:
            raise TimeoutError(f"Chromium sent no {waiting_for} within {self.timeout:.0f} s") from None

    def close(self) -> None:
        self.ws.close()


def _launch(chromium: str, profile: Path, log: Path, timeout: float) -> tuple[subprocess.Popen, str]:
    args = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--mute-audio",
        "about:blank",
    ]
    with log.open("wb") as err:
        # its own process group, so the renderers go down with it
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    active = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Chromium exited with {proc.returncode}: {said}")
        lines = active.read_text().splitlines() if active.exists() else []
        if len(lines) >= 2 and lines[0].strip().isdigit():
            return proc, f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
        time.sleep(0.05)
    _stop(proc)
    said = log.read_text(errors="replace")[-2000:]
    raise TimeoutError(f"Chromium did not open DevTools within {timeout:.0f} s: {said}")


def _launch_with_retries(
    chromium: str, tmp: Path, timeout: float, attempts: int = LAUNCH_ATTEMPTS
) -> tuple[subprocess.Popen, str]:
    """Start Chromium, starting afresh (a new profile) when one start stalls.

    Why: on a loaded CI machine one start in a few hundred printed nothing for 30 s and never
    opened DevTools, while the starts before and after it in the same session took 3 s. A
    stalled start says nothing about the report, so it is retried; a start that exits with an
    error is not, and every attempt's stall is named if all of them stall.
    """
    stalls: list[str] = []
    for attempt in range(1, attempts + 1):
        profile = tmp / f"profile-{attempt}"
        profile.mkdir()
        try:
            return _launch(chromium, profile, tmp / f"chromium-{attempt}.log", timeout)
        except TimeoutError as stalled:
            stalls.append(f"attempt {attempt}: {stalled}")
    raise TimeoutError(f"Chromium stalled on all {attempts} starts: " + " | ".join(stalls))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


def _arg_text(arg: dict) -> str:
    if "value" in arg:
        return str(arg["value"])
    return str(arg.get("description") or arg.get("unserializableValue") or arg.get("type"))


def _same_document(url: str, page: str) -> bool:
    return url.split("#", 1)[0] == page.split("#", 1)[0]


def load_page(
    chromium: str,
    html: Path,
    screenshot: Path | None = None,
    evaluate: dict[str, str] | None = None,
    size: tuple[int, int] = LAPTOP,
    full_page: bool = False,
    timeout: float = 30,
) -> PageReport:
    """Open ``html`` as a file:// page at ``size`` and report what the browser saw.

    ``evaluate`` maps names to JavaScript expressions run after the load; their JSON values
    land in ``values``. The browser is always stopped, whatever happens.
    """
    url = Path(html).resolve().as_uri()
    report = PageReport(url=url)
    with tempfile.TemporaryDirectory(prefix="hb-chromium-") as tmp:
        proc, ws_url = _launch_with_retries(chromium, Path(tmp), timeout)
        devtools: DevTools | None = None
        try:
            devtools = DevTools(ws_url, timeout)
            target = devtools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = devtools.send("Target.attachToTarget", {"targetId": target, "flatten": True})
            session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                devtools.send(f"{domain}.enable", session=session)
            width, height = size
            devtools.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            devtools.events.clear()  # about:blank's own events are not the page's
            nav = devtools.send("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                raise RuntimeError(f"Chromium could not open {url}: {nav['errorText']}")
            devtools.wait_for("Page.loadEventFired", timeout)
            devtools.drain(quiet=0.5)  # late requests and messages after the load event
            for name, expression in (evaluate or {}).items():
                result = devtools.send(
                    "Runtime.evaluate",
                    {"expression": expression, "returnByValue": True, "awaitPromise": True},
                    session=session,
                )
                if "exceptionDetails" in result:
                    raise RuntimeError(f"evaluating {name!r} threw: {result['exceptionDetails']}")
                report.values[name] = result["result"].get("value")
            if screenshot is not None:
                shot = devtools.send(
                    "Page.captureScreenshot",
                    {"format": "png", "captureBeyondViewport": full_page},
                    session=session,
                )
                screenshot = Path(screenshot)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                report.screenshot = screenshot
            devtools.drain(quiet=0.1)
        finally:
            if devtools is not None:
                try:
                    devtools.close()
                except Exception:  # noqa: BLE001 - the browser is stopped below either way
                    pass
            _stop(proc)
    for event in devtools.events:
        _record(report, event)
    return report


def _record(report: PageReport, event: dict) -> None:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
        text = " ".join(_arg_text(a) for a in params.get("args", []))
        report.console.append(f"{params['type']}: {text}")
    elif method == "Log.entryAdded":
        entry = params.get("entry", {})
        if entry.get("level") in ("error", "warning"):
            line = f"{entry['level']}: {entry.get('text', '')} {entry.get('url', '')}".rstrip()
            (report.failed_loads if entry.get("source") == "network" else report.console).append(line)
    elif method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        exc = details.get("exception", {})
        report.exceptions.append(str(exc.get("description") or details.get("text")))
    elif method == "Network.requestWillBeSent":
        req_url = params.get("request", {}).get("url", "")
        if not req_url.startswith("data:") and not _same_document(req_url, report.url):
            report.requests.append(req_url)
