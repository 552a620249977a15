"""``kernelpolicy lsp``: a language server for rule, policy and case files.

:mod:`.workspace` says what a text means (diagnostics from the same code as ``check``, hover,
completion, definition, symbols) and :mod:`.actions` what it offers to do (code actions, code
lenses and their commands) without the protocol; :mod:`.server` speaks LSP over stdio
with ``pygls`` (the ``lsp`` extra). Importing this package loads neither.
"""

from __future__ import annotations

__all__: list[str] = []
