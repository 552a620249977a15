"""A minimal W3C WebDriver client for chromedriver (standard library only), for the tests that
load a page in a real headless Chromium."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
]
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Browser:
    """One chromedriver process and one headless Chromium session."""

    def __init__(self, browser: str, driver: str) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [driver, f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise
                time.sleep(0.1)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": browser, "args": CHROMIUM_FLAGS},
                }
            }
        }
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())["value"]

    def _s(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self._s("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> str:
        return str(self._s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def click(self, element: str) -> None:
        self._s("POST", f"/element/{element}/click", {})

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._s("GET", "/screenshot")))

    def close(self) -> None:
        try:
            self._s("DELETE", "")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)
