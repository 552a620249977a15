"""Model ids resolved as vLLM resolves them: the local Hugging Face cache, then the Hub.

Only the small metadata files a decision needs are ever read or fetched (:data:`METADATA_FILES`),
never weights. The environment is read when a model is resolved, not at import, with the Hub
client's meaning: ``HF_HUB_CACHE`` (else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``),
``HF_HUB_OFFLINE``, ``HF_ENDPOINT`` and ``HF_TOKEN``; vLLM's ``--download-dir`` and
``--revision`` override the cache folder and the revision. ``VLLM_USE_MODELSCOPE`` (vLLM then
downloads from ModelScope, which is not read here) is kept so that a model id is refused, not
looked up on the wrong hub. ``huggingface_hub`` is imported only
when a model id has to be looked up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._paths import expand_user
from ..errors import UnknownModelError

__all__ = ["METADATA_FILES", "HubOptions", "cached_revisions", "fetch_metadata", "is_repo_id", "read_cached"]

#: The files a decision reads: config.json (required) and ModelOpt's hf_quant_config.json.
METADATA_FILES: Final = ("config.json", "hf_quant_config.json")
_REPO_ID: Final = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}\Z")
_TRUE: Final = ("1", "on", "yes", "true")
#: Seconds to wait for the Hub's answer to one metadata request.
TIMEOUT_S: Final = 10.0


def is_repo_id(spec: str) -> bool:
    """*spec* has the shape of a Hub repository id (``org/name``)."""
    return bool(_REPO_ID.match(spec)) and ".." not in spec and not spec.endswith(".json")


@dataclass(frozen=True)
class HubOptions:
    """Where and how model ids are looked up (see the module docstring)."""

    cache_dir: Path
    offline: bool = False
    endpoint: str = "https://huggingface.co"
    token: str | None = None
    revision: str | None = None
    modelscope: bool = False  #: ``VLLM_USE_MODELSCOPE``: vLLM reads ids from ModelScope

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        revision: str | None = None,
        download_dir: str | None = None,
    ) -> HubOptions:
        env = os.environ if environ is None else environ
        if download_dir:
            cache = expand_user(download_dir)
        elif env.get("HF_HUB_CACHE"):
            cache = expand_user(env["HF_HUB_CACHE"])
        else:
            home = env.get("HF_HOME") or str(Path(env.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface")
            cache = expand_user(home) / "hub"
        offline = (env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or "").strip().lower() in _TRUE
        return cls(
            cache_dir=cache,
            offline=offline,
            endpoint=(env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/"),
            token=env.get("HF_TOKEN") or None,
            revision=revision,
            modelscope=(env.get("VLLM_USE_MODELSCOPE") or "").strip().lower() in _TRUE,
        )


def cached_revisions(repo_id: str, hub: HubOptions) -> list[str]:
    """The branch and tag names (``refs/``) the cache holds for *repo_id*, sorted."""
    refs = hub.cache_dir / ("models--" + repo_id.replace("/", "--")) / "refs"
    try:
        return sorted(p.name for p in refs.iterdir() if p.is_file())
    except OSError:
        return []


def read_cached(repo_id: str, hub: HubOptions) -> dict[str, str] | None:
    """The metadata files of *repo_id* found in the local cache (``None``: config.json is not there)."""
    folder = hub.cache_dir / ("models--" + repo_id.replace("/", "--"))
    if not folder.is_dir():  # spares the Hub client's import for every catalog id
        return None
    from huggingface_hub import try_to_load_from_cache

    found: dict[str, str] = {}
    for name in METADATA_FILES:
        path = try_to_load_from_cache(repo_id, name, cache_dir=str(hub.cache_dir), revision=hub.revision)
        if isinstance(path, str):
            found[name] = path
    return found if "config.json" in found else None


def fetch_metadata(repo_id: str, hub: HubOptions) -> dict[str, str]:
    """Download *repo_id*'s metadata files into the cache; their local paths by file name.

    :raises UnknownModelError: the repository, the revision or its config.json does not exist,
        the repository is gated or private, or the Hub cannot be reached.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    unreachable: tuple[type[Exception], ...] = (OSError, ValueError, *_transport_errors())
    found: dict[str, str] = {}
    for name in METADATA_FILES:
        try:
            if name == "config.json":  # one HEAD without the client's retries: a clear error fast
                url = hf_hub_url(repo_id, name, revision=hub.revision, endpoint=hub.endpoint)
                get_hf_file_metadata(url, token=hub.token, timeout=TIMEOUT_S)
            found[name] = hf_hub_download(
                repo_id,
                name,
                revision=hub.revision,
                cache_dir=str(hub.cache_dir),
                endpoint=hub.endpoint,
                token=hub.token,
                etag_timeout=TIMEOUT_S,
            )
        except GatedRepoError:
            who = "the token in HF_TOKEN has no access" if hub.token else "set HF_TOKEN to a token with access"
            raise UnknownModelError(repo_id, f"a gated repository on `{hub.endpoint}` (401): {who}") from None
        except RepositoryNotFoundError as exc:
            code = _status(exc)
            hint = (
                ", or the token in HF_TOKEN has no access to it"
                if hub.token
                else "; if it is private or gated, set HF_TOKEN"
            )
            raise UnknownModelError(repo_id, f"no such repository on `{hub.endpoint}` ({code}){hint}") from None
        except RevisionNotFoundError:
            raise UnknownModelError(repo_id, f"no revision `{hub.revision}` on `{hub.endpoint}` (404)") from None
        except LocalEntryNotFoundError as exc:
            raise _unreachable(repo_id, hub, exc) from None
        except EntryNotFoundError:
            if name == "config.json":
                raise UnknownModelError(repo_id, "the repository has no `config.json`") from None
        except HfHubHTTPError as exc:
            raise UnknownModelError(repo_id, _http_reason(exc, name, hub)) from None
        except unreachable as exc:
            raise _unreachable(repo_id, hub, exc) from None
    return found


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client's connection errors (httpx in huggingface_hub 1.x, httpx2 in 2.x)."""
    import importlib

    found: list[type[Exception]] = []
    for module in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(module).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _unreachable(repo_id: str, hub: HubOptions, exc: Exception) -> UnknownModelError:
    cause = exc.__cause__ or exc.__context__ or exc
    if "OfflineMode" in cause.__class__.__name__:  # HF_HUB_OFFLINE as the Hub client read it at import
        return UnknownModelError(repo_id, f"not in the Hugging Face cache `{hub.cache_dir}` and HF_HUB_OFFLINE is set")
    return UnknownModelError(
        repo_id,
        f"not in the Hugging Face cache `{hub.cache_dir}`, and `{hub.endpoint}` cannot be reached"
        f" ({cause.__class__.__name__})",
    )


#: The Hub's ``X-Error-Message`` when it refuses the token itself (not the repository).
_BAD_TOKEN: Final = "Invalid credentials in Authorization header"


def _http_reason(exc: Exception, name: str, hub: HubOptions) -> str:
    """What an HTTP error the Hub client did not classify means, from its status and headers.

    The Hub answers 401 for a repository that does not exist as for one that is private or
    gated; huggingface_hub 2.x raises a plain ``HfHubHTTPError`` for it on file URLs. Only an
    explicit bad-credentials answer blames the token, and only when one was sent.
    """
    code = _status(exc)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    message = headers.get("X-Error-Message") if hasattr(headers, "get") else None
    where = f"`{hub.endpoint}`"
    if code == 401 and hub.token and message == _BAD_TOKEN:
        return f"{where} refused the token in HF_TOKEN (401): it is not valid"
    if code in (401, 404):
        if hub.token:
            return f"no such repository on {where} ({code}), or the token in HF_TOKEN has no access to it"
        return f"no such repository on {where} ({code}); if it is private or gated, set HF_TOKEN"
    if code == 403:
        return f"{where} forbids `{name}` (403): the token in HF_TOKEN lacks the permission"
    return f"{where} answered {code} for `{name}`"


def _status(exc: Exception) -> int | str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return int(code) if isinstance(code, int) else "?"
