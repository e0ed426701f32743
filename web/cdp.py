"""Headless Chromium driven over the DevTools protocol (python3-websocket): the browser tests'
shared plumbing (web/test_page.py, web/test_npm.py, bindings/python/tests/view_browser.py).

    with Chromium(window="1200,900") as cdp:     # a fresh profile, no network services
        cdp.call("Page.navigate", url="file:///...")
        cdp.wait_for("document.readyState === 'complete'", 30)
        cdp.eval("1 + 1")
        cdp.screenshot("page.png")

`require_tools()` exits with status 77 (meson's "skipped") and the reason when Chromium or
the websocket module is missing, unless CI=true, where that is a failure."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def missing(what, prog="browser test"):
    msg = f"{prog}: {what} (scripts/setup-debian.sh installs it)"
    if os.environ.get("CI") == "true":
        sys.exit(msg + ": failing, since CI=true")
    print("SKIP: " + msg)
    sys.exit(SKIP)


def require_tools(prog="browser test"):
    """(chromium path, websocket module), or exit 77 / fail under CI=true."""
    try:
        import websocket  # python3-websocket
    except ImportError:
        missing("the Python module websocket (Debian python3-websocket) is not installed", prog)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        missing("chromium is not installed", prog)
    return chromium, websocket


class CDP:
    """The smallest DevTools-protocol client: one page target, commands in order. Console
    messages, exceptions and requested URLs are collected as they arrive."""

    def __init__(self, ws_url, websocket):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.console = []
        self.requests = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.consoleAPICalled":
                args = msg["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                             for a in args))
            elif msg.get("method") == "Network.requestWillBeSent":
                self.requests.append(msg["params"]["request"]["url"])
            elif msg.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " +
                                    json.dumps(msg["params"]["exceptionDetails"])[:500])
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr, await_promise=False):
        """The value of a JavaScript expression (JSON-serialisable results)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:80]}...: {json.dumps(r['exceptionDetails'])[:800]}")
        return r.get("result", {}).get("value")

    def wait_for(self, expr, timeout, interval=0.2):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(interval)
        return None

    def screenshot(self, path, full=True):
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=full)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path

    def mouse(self, x, y, kind="mouseMoved", button="none", clicks=0):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button=button,
                  clickCount=clicks)


class Chromium:
    """A headless Chromium with a fresh profile, as a context manager giving a CDP client
    on its page (Runtime, Page and Network enabled). Flags: no sandbox (containers), no GPU,
    no background networking, sync, component updates or first-run pages."""

    def __init__(self, window="1000,2400", prog="browser test", extra=()):
        self.window, self.prog, self.extra = window, prog, list(extra)

    def __enter__(self):
        chromium, websocket = require_tools(self.prog)
        self.profile = tempfile.mkdtemp(prefix="induct-chromium-")
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--disable-renderer-backgrounding",
             "--disable-background-timer-throttling", f"--window-size={self.window}",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self.profile}", *self.extra, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Chromium writes the port it chose into DevToolsActivePort
            port_file = os.path.join(self.profile, "DevToolsActivePort")
            for _ in range(600):
                if os.path.exists(port_file) and open(port_file).read().strip():
                    break
                if self.proc.poll() is not None:
                    raise RuntimeError(f"chromium exited with status {self.proc.returncode}")
                time.sleep(0.1)
            port = int(open(port_file).read().split()[0])
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json"))
            page = next(t for t in targets if t["type"] == "page")
            self.cdp = CDP(page["webSocketDebuggerUrl"], websocket)
            for domain in ("Runtime", "Page", "Network"):
                self.cdp.call(f"{domain}.enable")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.cdp

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
