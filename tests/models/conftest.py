"""A Hub-like HTTP server and a Hugging Face cache on disk, for resolving model ids offline.

The server answers the Hub's file endpoint (``/{org}/{name}/resolve/{revision}/{file}``, HEAD
and GET) with the headers the Hub client reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``)
and the Hub's error codes (``X-Error-Code``: ``RepoNotFound``, ``GatedRepo``,
``RevisionNotFound``, ``EntryNotFound``). It listens on 127.0.0.1 only and logs every path asked
for, so tests can check that nothing but metadata files is fetched.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Repo:
    files: dict[str, bytes]
    gated_token: str | None = None  #: the token that may read it (gated when set)
    revisions: tuple[str, ...] = ("main",)


@dataclass
class HubServer:
    url: str
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    #: answer an unknown repository as the Hub does on file URLs today: a bare 401, without
    #: ``X-Error-Code`` (huggingface_hub 2.x raises a plain ``HfHubHTTPError`` for it)
    bare_401: bool = False
    #: tokens the Hub does not know: refused with ``X-Error-Message: Invalid credentials ...``
    bad_tokens: tuple[str, ...] = ()

    def add(self, repo_id: str, files: Mapping[str, Any], **kw: Any) -> None:
        self.repos[repo_id] = Repo({k: _bytes(v) for k, v in files.items()}, **kw)

    @property
    def paths(self) -> list[str]:
        return [p for _m, p in self.requests]


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


def _handler(server: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, body: bool) -> None:
            server.requests.append((self.command, self.path))
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return self._error(404, "RepoNotFound")
            repo_id, revision, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
            repo = server.repos.get(repo_id)
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            if token and token in server.bad_tokens:
                return self._error(401, None, "Invalid credentials in Authorization header")
            if repo is None:
                # the Hub answers 401 for unknown repos
                return self._error(401, None if server.bare_401 else "RepoNotFound")
            if repo.gated_token is not None and self.headers.get("Authorization") != f"Bearer {repo.gated_token}":
                return self._error(401, "GatedRepo")
            if revision not in repo.revisions and revision != COMMIT:
                return self._error(404, "RevisionNotFound")
            data = repo.files.get(name)
            if data is None:
                return self._error(404, "EntryNotFound")
            self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if body:
                self.wfile.write(data)
            return None

        def _error(self, code: int, error_code: str | None, message: str | None = None) -> None:
            self.send_response(code)
            if error_code is not None:
                self.send_header("X-Error-Code", error_code)
            if message is not None:
                self.send_header("X-Error-Message", message)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

    return Handler


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubServer]:
    """A Hub on 127.0.0.1; HF_ENDPOINT points at it, the cache is empty, and online is allowed."""
    state = HubServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", state.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import huggingface_hub.constants

    # the Hub client reads HF_HUB_OFFLINE once, at import; the suite's default set it
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def write_cache(
    cache: Path, repo_id: str, files: Mapping[str, Any], *, ref: str = "main", commit: str = COMMIT
) -> Path:
    """*files* of *repo_id* laid out as the Hub client caches them: blobs, a snapshot of
    symlinks, and ``refs/<ref>`` naming the commit. Returns the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)
    for name, value in files.items():
        data = _bytes(value)
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    return snapshot
