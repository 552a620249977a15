"""``kernelpolicy lsp``: the language server over stdio (pygls), for rule, policy and case files.

The protocol side only: what is said about a text comes from :mod:`.workspace`. Diagnostics are
debounced (YAML and schema errors :data:`FAST_S` after the last change, the whole check with the
proof :data:`DEBOUNCE_S` after it), computed off the event loop one at a time,
and published only when the text they were computed for is still the newest version of the
document (a slow proof of an old version never overwrites a newer result).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp
from pygls.server import LanguageServer
from pygls.uris import to_fs_path

from .._version import __version__
from . import actions as act
from . import workspace as ws

__all__ = ["DEBOUNCE_S", "FAST_S", "build", "serve"]

#: How long after the last change the whole check (with the proof) runs.
DEBOUNCE_S = 0.3
#: How long after the last change the file's YAML and schema errors are looked for.
FAST_S = 0.05
_LANGUAGES = ("yaml",)
_SEVERITY = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}


class _Server(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernelpolicy", __version__)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelpolicy-check")
        self.pending: dict[str, asyncio.Task[None]] = {}
        self._index: ws.Index | None = None
        #: the policy files the workspace configuration names (``initializationOptions`` or
        #: ``workspace/didChangeConfiguration``: ``{"kernelpolicy": {"policy": [...]}}``)
        self.policy: tuple[Path, ...] = ()
        self.root: Path | None = None
        #: the code lenses of each document's last text (a case's lens resolves the case)
        self.lenses: dict[str, tuple[str, list[act.Lens]]] = {}

    def configure(self, settings: object) -> bool:
        """Take the policy files of *settings* (``{"policy": [...]}``, or that under a
        ``kernelpolicy`` key); relative paths are of the workspace's root. Whether they changed."""
        if isinstance(settings, dict) and isinstance(settings.get("kernelpolicy"), dict):
            settings = settings["kernelpolicy"]
        if not isinstance(settings, dict) or "policy" not in settings:
            return False
        named = settings["policy"]
        items = [named] if isinstance(named, str) else named if isinstance(named, list) else []
        root = self.root or Path.cwd()
        policy = tuple(root / p if not Path(p).is_absolute() else Path(p) for p in items if isinstance(p, str) and p)
        changed = policy != self.policy
        self.policy = policy
        return changed

    @property
    def index(self) -> ws.Index:
        """The shipped tables, loaded again when a file under ``rules/`` or ``policy/`` changed."""
        if self._index is None or self._index.stale():
            self._index = ws.Index()
        return self._index

    def opened(self, but: str | None = None) -> dict[Path, str]:
        """The open buffers (path -> text), but *but*."""
        out: dict[Path, str] = {}
        for uri, doc in self.workspace.text_documents.items():
            path = to_fs_path(uri)
            if uri != but and path:
                out[Path(path)] = doc.source
        return out


def _path(uri: str) -> Path:
    return Path(to_fs_path(uri) or uri)


def _diagnostic(d: ws.Diag) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=lsp.Range(lsp.Position(d.line, d.column), lsp.Position(d.end_line, d.end_column)),
        message=d.message,
        severity=_SEVERITY[d.severity],
        code=d.code,
        source="kernelpolicy",
        data={"rule": d.rule, "cell": d.cell} if d.rule and d.cell else None,
    )


async def _checked(server: _Server, uri: str, version: int | None, coverage: bool) -> list[ws.Diag] | None:
    """The diagnostics of *uri* as it is now (``None``: it is no longer at *version*)."""
    current = server.workspace.text_documents.get(uri)
    if current is None or current.version != version:
        return None
    text, path, opened = current.source, _path(uri), server.opened(but=uri)
    loop = asyncio.get_running_loop()
    try:
        found = await loop.run_in_executor(
            server.pool, lambda: ws.diagnose(text, path, coverage=coverage, opened=opened, policy=server.policy)
        )
    except Exception as exc:  # a bug of the check: said on the file, never a dead server
        found = [ws.Diag(0, 0, 0, 0, "error", f"internal error: {exc.__class__.__name__}: {exc}", "internal")]
    current = server.workspace.text_documents.get(uri)
    if current is None or current.version != version:
        return None  # the text changed (or closed) meanwhile: a newer run publishes
    return found


async def _diagnose_later(server: _Server, uri: str, version: int | None, delay: float) -> None:
    """After :data:`FAST_S`, the file's YAML and schema errors (tens of milliseconds); where it
    has none, after *delay*, the whole check with the proof."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.sleep(min(delay, FAST_S))
    found = await _checked(server, uri, version, coverage=False)
    if found is None:
        return
    if any(d.severity == "error" for d in found):  # nothing to prove until the file loads
        server.publish_diagnostics(uri, [_diagnostic(d) for d in found], version=version)
        return
    await asyncio.sleep(max(start + delay - loop.time(), 0))  # the proof: *delay* after the change
    found = await _checked(server, uri, version, coverage=True)
    if found is not None:
        server.publish_diagnostics(uri, [_diagnostic(d) for d in found], version=version)


def _schedule(server: _Server, uri: str, delay: float = DEBOUNCE_S) -> None:
    old = server.pending.pop(uri, None)
    if old is not None:
        old.cancel()
    version = server.workspace.get_text_document(uri).version
    server.pending[uri] = asyncio.ensure_future(_diagnose_later(server, uri, version, delay))


def build() -> LanguageServer:
    """The server, with its features registered."""
    return _build()


def _build() -> _Server:  # noqa: PLR0915 (one registration per feature)
    server = _Server()

    @server.feature(lsp.INITIALIZE)
    def on_initialize(ls: _Server, params: lsp.InitializeParams) -> None:
        root = params.root_uri or (params.workspace_folders[0].uri if params.workspace_folders else None)
        ls.root = _path(root) if root else None
        ls.configure(params.initialization_options)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def on_configuration(ls: _Server, params: lsp.DidChangeConfigurationParams) -> None:
        if ls.configure(params.settings):  # the files under every open buffer changed: check them again
            for uri in list(ls.workspace.text_documents):
                _schedule(ls, uri, delay=0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: _Server, params: lsp.DidOpenTextDocumentParams) -> None:
        _schedule(ls, params.text_document.uri, delay=0)
        if ls._index is None:  # the tables hover and completion read: loaded off the event loop
            asyncio.get_running_loop().run_in_executor(ls.pool, lambda: ls.index)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: _Server, params: lsp.DidChangeTextDocumentParams) -> None:
        _schedule(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: _Server, params: lsp.DidSaveTextDocumentParams) -> None:
        _schedule(ls, params.text_document.uri, delay=0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: _Server, params: lsp.DidCloseTextDocumentParams) -> None:
        task = ls.pending.pop(params.text_document.uri, None)
        if task is not None:
            task.cancel()
        ls.lenses.pop(params.text_document.uri, None)
        ls.publish_diagnostics(params.text_document.uri, [])

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: _Server, params: lsp.HoverParams) -> lsp.Hover | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        text = ws.hover(doc.source, params.position.line, params.position.character, ls.index)
        if text is None:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["{", " ", ","]))
    def on_completion(ls: _Server, params: lsp.CompletionParams) -> lsp.CompletionList:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        kinds = {
            "fact": lsp.CompletionItemKind.Property,
            "backend": lsp.CompletionItemKind.EnumMember,
            "value": lsp.CompletionItemKind.Value,
            "rule": lsp.CompletionItemKind.Reference,
        }
        items = [
            lsp.CompletionItem(label=c.label, kind=kinds[c.kind], detail=c.detail)
            for c in ws.completions(doc.source, params.position.line, params.position.character, ls.index)
        ]
        return lsp.CompletionList(is_incomplete=False, items=items)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: _Server, params: lsp.DefinitionParams) -> lsp.Location | None:
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        opened = {_path(uri): doc.source, **ls.opened(but=uri)}
        where = ws.definition(doc.source, params.position.line, params.position.character, ls.index, opened)
        if where is None:
            return None
        pos = lsp.Position(where.line, where.column)
        return lsp.Location(uri=where.path.as_uri(), range=lsp.Range(pos, pos))

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def on_references(ls: _Server, params: lsp.ReferenceParams) -> list[lsp.Location]:
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        pos = params.position
        found = ws.references(
            doc.source, pos.line, pos.character, _path(uri), ls.index, ls.opened(but=uri), policy=ls.policy
        )
        out = []
        for f in found:
            start = lsp.Position(f.line, f.column)
            end = lsp.Position(f.line, f.column + len(ws.word_at(doc.source, pos.line, pos.character) or ""))
            out.append(lsp.Location(uri=f.path.as_uri(), range=lsp.Range(start, end)))
        return out

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def on_formatting(ls: _Server, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit] | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        new = ws.formatted(doc.source, _path(params.text_document.uri))
        if new is None or new == doc.source:
            return None if new is None else []
        end = lsp.Position(len(doc.lines), 0)  # the whole text, replaced
        return [lsp.TextEdit(range=lsp.Range(lsp.Position(0, 0), end), new_text=new)]

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(ls: _Server, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        out = []
        for s in ws.symbols(doc.source):
            whole = lsp.Range(lsp.Position(s.line, 0), lsp.Position(s.end_line + 1, 0))
            name = lsp.Range(lsp.Position(s.line, s.column), lsp.Position(s.line, s.column + len(s.name)))
            out.append(
                lsp.DocumentSymbol(
                    name=s.name, detail=s.kind, kind=lsp.SymbolKind.Object, range=whole, selection_range=name
                )
            )
        return out

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source]),
    )
    async def on_code_action(ls: _Server, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        text, path, policy = doc.source, _path(uri), ls.policy
        found: list[act.Fix] = []
        for d in params.context.diagnostics:  # the proof's findings about a rule of this file
            data = d.data if isinstance(d.data, dict) else {}
            if isinstance(data.get("rule"), str) and isinstance(data.get("cell"), str):
                fix = act.narrowing(text, path, data["rule"], data["cell"])
                if fix is not None and fix.title not in {f.title for f in found}:
                    found.append(fix)
        loop = asyncio.get_running_loop()
        found += await loop.run_in_executor(ls.pool, lambda: act.bound_fixes(text, path, policy))
        new = ws.formatted(text, path)
        if new is not None and new != text:
            end = len(doc.lines)
            found.append(
                act.Fix("format the file as `kernelpolicy fmt` does", "source", (act.Edit(0, 0, end, 0, new),))
            )
        wanted = params.context.only
        out = []
        for f in found:
            kind = lsp.CodeActionKind.QuickFix if f.kind == "quickfix" else lsp.CodeActionKind.Source
            if wanted and not any(kind.value.startswith(w.value if hasattr(w, "value") else str(w)) for w in wanted):
                continue
            edits = [lsp.TextEdit(range=_range(e), new_text=e.text) for e in f.edits]
            out.append(lsp.CodeAction(title=f.title, kind=kind, edit=lsp.WorkspaceEdit(changes={uri: edits})))
        return out

    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    async def on_code_lens(ls: _Server, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        text, path = ls.workspace.get_text_document(uri).source, _path(uri)
        loop = asyncio.get_running_loop()

        def lenses() -> list[act.Lens]:
            cached = ls.lenses.get(uri)
            if cached is not None and cached[0] == text:  # editors ask again on every change and scroll
                return cached[1]
            found = [x for x in (act.case_lens(text, path, uri), act.diff_lens(text, path, uri)) if x is not None]
            ls.lenses[uri] = (text, found)
            return found

        return [
            lsp.CodeLens(
                range=lsp.Range(lsp.Position(x.line, 0), lsp.Position(x.line, 0)),
                command=lsp.Command(title=x.title, command=x.command, arguments=list(x.arguments)),
            )
            for x in await loop.run_in_executor(ls.pool, lenses)
        ]

    @server.command("kernelpolicy.explain")
    async def explain(ls: _Server, args: list[object]) -> str:
        """The case's ``explain`` (the answer, and a message the editor shows)."""
        return await _run_command(ls, args, act.case_explain)

    @server.command("kernelpolicy.diff")
    async def diff(ls: _Server, args: list[object]) -> str:
        """The buffer's ``diff`` against the file on disk."""
        return await _run_command(ls, args, lambda text, path: act.diff_on_disk(text, path, ls.policy))

    return server


def _range(e: act.Edit) -> lsp.Range:
    return lsp.Range(lsp.Position(e.line, e.column), lsp.Position(e.end_line, e.end_column))


async def _run_command(ls: _Server, args: list[object], fn: Callable[[str, Path], str]) -> str:
    uri = args[0] if args and isinstance(args[0], str) else None
    doc = ls.workspace.text_documents.get(uri) if uri else None
    if uri is None or doc is None:
        return "no such open document" + (f" `{uri}`" if uri else "")
    text, path = doc.source, _path(uri)
    out = await asyncio.get_running_loop().run_in_executor(ls.pool, lambda: fn(text, path))
    ls.show_message_log(out)
    return out


def serve() -> int:
    """Speak LSP on standard input and output until the client says ``exit``; the exit status:
    0 when ``shutdown`` came first, 1 otherwise (as the protocol asks)."""
    server = _build()
    # copies of the descriptors: pygls closes its streams on `exit`, and the command line still
    # flushes its own standard output afterwards
    stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    try:
        server.start_io(stdin, stdout)  # type: ignore[arg-type]  # (bytes, as pygls reads them; it says TextIO)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    finally:
        # checks still queued are of texts nobody waits for now; the one running ends on its own
        server.pool.shutdown(wait=False, cancel_futures=True)
        for stream in (stdin, stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.close()
    return 0 if getattr(server.lsp, "_shutdown", False) else 1
