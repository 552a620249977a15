"""The rule language's file reading, for other packages (``check``, ``test``, ``fmt``): bounded
reads, the YAML walk of a folder, and YAML with every node's place. The code lives in the DSL's
private modules; this is their public face."""

from __future__ import annotations

from ._source import PinnedSource, SourceError, SourceFile, decode, read_bounded, yaml_files_under
from ._yaml import Located, YamlError, load_located

__all__ = [
    "Located",
    "PinnedSource",
    "SourceError",
    "SourceFile",
    "YamlError",
    "decode",
    "load_located",
    "read_bounded",
    "yaml_files_under",
]
