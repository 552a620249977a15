"""SGLang: the plugin (:mod:`.plugin`), the facts it reads from SGLang's server arguments, the
audit harness (:mod:`.testing`) and the conformance sweep (:mod:`.conformance`). Importing this
package imports no SGLang and nothing of the plugin."""

from __future__ import annotations

__all__: list[str] = []
