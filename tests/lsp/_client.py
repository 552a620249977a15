"""A small LSP client for the tests: JSON-RPC with ``Content-Length`` framing over a subprocess's
standard input and output, as an editor speaks to ``kernelpolicy lsp``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Client"]


class Client:
    """``kernelpolicy lsp`` started as an editor starts it (``python -m kernelpolicy lsp``)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelpolicy", "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else dict(os.environ),
        )
        self._next = 0
        self._responses: dict[int, Any] = {}
        self._incoming: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []  #: every notification so far, in order
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # --- framing -------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = out.readline()
                if not line:
                    self._incoming.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = out.read(int(headers["content-length"]))
            self._incoming.put(json.loads(body))

    def _pump(self, deadline: float) -> bool:
        """Take one message (``False``: none came before *deadline*)."""
        try:
            msg = self._incoming.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            return False
        if msg is None:
            raise AssertionError(f"the server ended: {self.stderr_text()}")
        if "id" in msg and "method" not in msg:
            self._responses[msg["id"]] = msg
        elif "id" in msg:  # a request of the server's (workDoneProgress/create, ...): say yes
            self._send({"id": msg["id"], "result": None})
        else:
            self.notifications.append(msg)
        return True

    # --- the protocol ----------------------------------------------------------------------
    def request(self, method: str, params: Any, timeout: float = 20) -> Any:
        self._next += 1
        rid = self._next
        self._send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while rid not in self._responses:
            if not self._pump(deadline) and time.monotonic() >= deadline:
                raise AssertionError(f"no answer to `{method}` in {timeout} s")
        msg = self._responses.pop(rid)
        assert "error" not in msg, msg
        return msg["result"]

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def diagnostics(self, uri: str, *, version: int, timeout: float = 90) -> list[dict[str, Any]]:
        """The diagnostics the server publishes for *uri* at *version* (waits for them)."""
        deadline = time.monotonic() + timeout
        while True:
            for n in self.notifications:
                p = n["params"]
                if n["method"] == "textDocument/publishDiagnostics" and p["uri"] == uri and p.get("version") == version:
                    return list(p["diagnostics"])
            if not self._pump(deadline) and time.monotonic() >= deadline:
                raise AssertionError(f"no diagnostics for {uri} at version {version} in {timeout} s")

    def published(self, uri: str) -> list[dict[str, Any]]:
        """Every publishDiagnostics for *uri* so far."""
        return [
            n["params"]
            for n in self.notifications
            if n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == uri
        ]

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        item = {"uri": uri, "languageId": "yaml", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> int:
        """``shutdown`` then ``exit``; the server's exit status."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", None, timeout=10)
                self.notify("exit", None)
                return self.proc.wait(timeout=10)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        return self.proc.wait(timeout=10)
