"""Open a page in headless Chromium and read back what it rendered: DOM text, console errors, a screenshot.

The driver speaks the Chrome DevTools Protocol over ``--remote-debugging-pipe``: Chromium reads
NUL-terminated JSON commands on its fd 3 and writes replies and events on its fd 4, so no port, no
network and no Python package beyond the standard library are needed. It attaches to a fresh tab,
enables Runtime, Log and Network, loads the page and collects, as errors: uncaught exceptions
(``Runtime.exceptionThrown``), ``console.error``/``console.assert`` calls (``Runtime.consoleAPICalled``),
the browser's own error log (``Log.entryAdded``: a resource that failed to load, a blocked request) and
any request to something other than the page itself or a ``data:`` URL (the dashboard must be
self-contained). The browser is found as ``$OPTBENCH_CHROMIUM``, else ``chromium`` (Debian's package),
``chromium-browser``, ``google-chrome`` or ``chrome`` on PATH.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH = 1280
TIMEOUT_S = 30.0
MAX_SCREENSHOT_HEIGHT = 12000
_SETTLE = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))"


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    explicit = os.environ.get("OPTBENCH_CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    return next((path for name in NAMES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """The browser could not be started or stopped answering."""


class _Chromium:
    """One headless Chromium process and one tab, driven over the DevTools pipe."""

    def __init__(self, exe: str | None = None, timeout_s: float = TIMEOUT_S):
        exe = exe or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found (install Debian's 'chromium', or set OPTBENCH_CHROMIUM); "
                               f"looked for {', '.join(NAMES)}")
        self.timeout_s = timeout_s
        self._profile = tempfile.TemporaryDirectory(prefix="optbench-chromium-")
        self._log = Path(self._profile.name) / "chromium.log"
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # out of the way of 3 and 4 first, so the two dup2s below cannot clobber each other
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)]
        args = [exe, "--headless", "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--mute-audio", "--hide-scrollbars", f"--window-size={WIDTH},900"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, str(self._log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                   (os.POSIX_SPAWN_DUP2, 1, 2),
                   (os.POSIX_SPAWN_DUP2, high[0], 3), (os.POSIX_SPAWN_DUP2, high[1], 4)]
        try:
            self.pid = os.posix_spawn(exe, [*args, "about:blank"], os.environ, file_actions=actions)
        except OSError as exc:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            self._profile.cleanup()
            raise BrowserError(f"cannot start {exe}: {exc}") from None
        finally:
            for fd in (to_chrome_r, from_chrome_w, *high):
                os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def __enter__(self) -> "_Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _log_tail(self) -> str:
        try:
            lines = [s for s in self._log.read_text(errors="replace").splitlines() if s.strip()]
        except OSError:
            return ""
        return f" (browser log: {lines[-1][:300]})" if lines else ""

    def receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {self.timeout_s:g} s{self._log_tail()}")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium exited{self._log_tail()}")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command (to the browser, or to a tab's ``session``) and return its result; events that
        arrive meanwhile are kept in ``events``."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_chrome, data):]
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self.receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def tab(self) -> "Tab":
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        return Tab(self, self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.02)
        self._profile.cleanup()


class Tab:
    """One page of the browser: commands go to its session, and only its events are read."""

    def __init__(self, browser: _Chromium, session: str):
        self.browser, self.session = browser, session

    @property
    def events(self) -> list[dict]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def call(self, method: str, **params) -> dict:
        return self.browser.call(method, session=self.session, **params)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.browser.timeout_s
        seen = next((e for e in self.events if e["method"] == method), None)
        while seen is None:
            event = self.browser.receive(deadline)
            if "method" in event:
                self.browser.events.append(event)
                seen = event if event["method"] == method and event.get("sessionId") == self.session else None
        return seen

    def evaluate(self, expression: str, await_promise: bool = False):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        return result.get("result", {}).get("value")

    def load(self, url: str) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
        navigated = self.call("Page.navigate", url=url)
        if navigated.get("errorText"):
            raise BrowserError(f"cannot open {url}: {navigated['errorText']}")
        self.wait_for("Page.loadEventFired")
        self.evaluate(_SETTLE, await_promise=True)

    def errors(self, url: str) -> list[str]:
        """What went wrong on the page, one line each, in the order it happened."""
        out = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                text = (details.get("exception") or {}).get("description") or details.get("text", "")
                out.append(f"uncaught exception (line {details.get('lineNumber', 0) + 1}): {text.splitlines()[0] if text else ''}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                out.append(f"console.{params['type']}: {args}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                out.append(f"browser log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
            elif method == "Network.requestWillBeSent":
                requested = params.get("request", {}).get("url", "")
                if requested != url and not requested.startswith(("data:", "about:", "blob:")):
                    out.append(f"request to {requested}: the page must be self-contained")
        return out


def _url(html_path) -> str:
    return Path(html_path).resolve().as_uri()


def render_all(html_paths) -> list[tuple[str, list[str]]]:
    """``render`` for several pages, each in its own tab of one browser (one start-up for all)."""
    out = []
    with _Chromium() as browser:
        for path in html_paths:
            url, tab = _url(path), browser.tab()
            tab.load(url)
            out.append((tab.evaluate("document.body ? document.body.innerText : ''") or "", tab.errors(url)))
    return out


def render(html_path) -> tuple[str, list[str]]:
    """Load ``html_path`` (a file:// URL) in headless Chromium; return (the body's rendered text, errors).

    ``errors`` lists uncaught exceptions, console errors, the browser's error log and any request the
    page made for something outside itself; an empty list and a non-empty text mean a clean render."""
    return render_all([html_path])[0]


def screenshot(html_path, png_path, width: int = WIDTH) -> Path:
    """Save a full-page PNG of ``html_path`` (at most ``MAX_SCREENSHOT_HEIGHT`` px tall)."""
    png_path = Path(png_path)
    with _Chromium() as browser:
        tab = browser.tab()
        tab.load(_url(html_path))
        size = tab.call("Page.getLayoutMetrics").get("cssContentSize", {})
        height = int(min(max(size.get("height", 900), 100), MAX_SCREENSHOT_HEIGHT))
        tab.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        tab.evaluate(_SETTLE, await_promise=True)
        shot = tab.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    png_path.parent.mkdir(parents=True, exist_ok=True)
    png_path.write_bytes(base64.b64decode(shot["data"]))
    return png_path
