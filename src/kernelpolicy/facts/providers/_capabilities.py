"""Pure tables: what an installed version implies, as measured (docs/probes, research notes)."""

from __future__ import annotations

from packaging.version import Version

__all__ = ["CUTLASS_DSL_SM121A", "TRITON_TARGETS", "cutlass_dsl_sm121a_ok", "triton_target_ok"]

#: Triton target -> the first release whose bundled ptxas accepts it. sm_90a is known good
#: from 3.0 on (older releases are left unknown); sm_100a/sm_120a need the bundled
#: ptxas-blackwell 12.8 (3.3.0); sm_121a needs ptxas-blackwell 12.9 (3.6.0).
TRITON_TARGETS: dict[str, str] = {
    "sm90a": "3.0.0",
    "sm100a": "3.3.0",
    "sm120a": "3.3.0",
    "sm121a": "3.6.0",
}
#: nvidia-cutlass-dsl emits ``sm_121a`` code from this release on.
CUTLASS_DSL_SM121A = "4.6.0"


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() converts
        return None


def triton_target_ok(triton_version: str, target: str) -> bool | None:
    """Whether this Triton compiles for *target* (``sm121a``); ``None`` when not known."""
    v, first = _version(triton_version), TRITON_TARGETS.get(target)
    if v is None or first is None:
        return None
    if v.release >= Version(first).release:
        return True
    if target == "sm90a":
        return None
    return False


def cutlass_dsl_sm121a_ok(version: str) -> bool | None:
    v = _version(version)
    return None if v is None else v.release >= Version(CUTLASS_DSL_SM121A).release
