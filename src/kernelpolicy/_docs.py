"""Regenerate the generated documentation of a source checkout: ``python -m kernelpolicy._docs``.

Writes the rule files generated from vLLM's and SGLang's per-release data
(``releases/vllm/generate.py``, ``releases/sglang/generate.py``, and both engines' pins:
``releases/packages/pins.py``),
then the README's environment table, ``docs/matrix.md`` and ``schemas/*.schema.json`` from
the code and the shipped rules; the tests in ``tests/tools/`` fail until this has been run
after a change to any of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["main"]


def main(root: Path | None = None) -> int:
    from ._environment import replace_table, table
    from .dsl.loader import load_policy
    from .releases.vllm.generate import generated_files, release_table, replace_release_table
    from .releases.vllm.versions import release_records
    from .tools.matrix import build, to_markdown
    from .tools.schemas import SCHEMA_NAMES, render

    root = root or Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        print(f"kernelpolicy: `{root}` is not a source checkout", file=sys.stderr)
        return 2
    from .releases.packages.pins import sglang_generated_files as sglang_pin_files
    from .releases.sglang.generate import generated_files as sglang_generated_files

    generated = {**generated_files(release_records(), root), **sglang_generated_files(root), **sglang_pin_files(root)}
    for path, text in generated.items():
        path.write_text(text, encoding="utf-8")
    policy = load_policy(environ=False)
    readme = root / "README.md"
    text = replace_release_table(readme.read_text(encoding="utf-8"), release_table(release_records()))
    readme.write_text(replace_table(text, table(policy)), encoding="utf-8")
    (root / "docs" / "matrix.md").write_text(to_markdown(build(policy)), encoding="utf-8")
    for name in SCHEMA_NAMES:
        (root / "schemas" / f"{name}.schema.json").write_text(render(name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
