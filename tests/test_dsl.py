"""The rule DSL: every problem in every file reported at once, each with file:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

import kernelpolicy as kp
from kernelpolicy.dsl.conditions import ConditionError, evaluate, parse_condition
from kernelpolicy.errors import PolicyError

CATALOG = """
backends:
  - backend: triton
    paths: [dense, moe]
  - backend: deep_gemm
    paths: [dense, moe]
    warmup: true
"""


def load(tmp_path: Path, **files: str) -> kp.Policy:
    paths = []
    for name, text in files.items():
        p = tmp_path / f"{name}.yaml"
        p.write_text(text)
        paths.append(p)
    return kp.load_policy(paths, shipped=False, default_policy=False, environ=False)


def errors(tmp_path: Path, **files: str) -> list[str]:
    with pytest.raises(PolicyError) as err:
        load(tmp_path, **files)
    return [d.one_line().replace(str(tmp_path) + "/", "") for d in err.value.diagnostics]


def test_all_errors_reported_at_once_with_positions(tmp_path: Path) -> None:
    bad = """
rules:
  - id: one
    when: {gpu.famly: sm120}
    deny: deep_gemm
    severity: crash
    because: x
    refs: [a#1]
  - id: two
    when: {gpu.family: sm120}
    deny: deep_gem
    severity: crash
    because: x
    refs: [a#1]
  - id: three
    when: {gpu.family: sm120}
    deny: triton
    severity: fatal
    because: x
"""
    out = errors(tmp_path, catalog=CATALOG, bad=bad)
    assert out[0].startswith("bad.yaml:4:12: error: unknown fact key `gpu.famly` (rule `one`)")
    assert any(o.startswith("bad.yaml:11:11: error: no path has a backend `deep_gem`") for o in out)
    assert any(o.startswith("bad.yaml:18:15: error:") and "severity" in o for o in out)
    assert len(out) == 3


def test_did_you_mean_for_keys_fields_and_backends(tmp_path: Path) -> None:
    bad = """
rules:
  - id: one
    when: {gpu.famly: sm120}
    deny: deep_gemm
    severity: crash
    becuase: x
"""
    with pytest.raises(PolicyError) as err:
        load(tmp_path, catalog=CATALOG, bad=bad)
    helps = {d.message: d.help for d in err.value.diagnostics}
    assert helps["unknown field `becuase`"] == "did you mean `because`?"


def test_caret_rendering(tmp_path: Path) -> None:
    bad = "rules:\n  - id: one\n    when: {gpu.family: sm12}\n    deny: triton\n    severity: crash\n    because: x\n"
    with pytest.raises(PolicyError) as err:
        load(tmp_path, catalog=CATALOG, bad=bad)
    text = err.value.render()
    assert "    3 |     when: {gpu.family: sm12}" in text
    assert "^" in text.splitlines()[2]
    assert "did you mean `sm120`?" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: [\n", "invalid YAML"),
        ("a: &x [1]\nb: *x\n", "anchors and aliases are not allowed"),
        (
            "rules: !!python/object/apply:os.system [echo pwned]\n",
            "tag `tag:yaml.org,2002:python/object/apply:os.system` is not allowed",
        ),
        ("rules: []\nrules: []\n", "duplicate key `rules`"),
        ("- just\n- a list\n", "a rule file must be a mapping of sections"),
        ("colour: red\n", "unknown section `colour`"),
    ],
)
def test_unsafe_or_malformed_yaml(tmp_path: Path, text: str, message: str) -> None:
    out = errors(tmp_path, bad=text)
    assert any(message in o and o.startswith("bad.yaml:") for o in out), out


def test_oversized_file_refused(tmp_path: Path) -> None:
    out = errors(tmp_path, bad="rules: []\n" + "#" * 1_100_000 + "\n")
    assert any("larger than" in o for o in out)


def test_effect_rules(tmp_path: Path) -> None:
    bad = """
rules:
  - id: two-effects
    deny: triton
    prefer: [deep_gemm]
    paths: [moe]
    severity: perf
    because: x
    refs: [a#1]
  - id: prefer-without-paths
    prefer: [triton]
    because: x
  - id: deny-without-severity
    deny: triton
    because: x
    refs: [a#1]
  - id: use-in-shipped
    use: triton
    because: x
"""
    out = errors(tmp_path, catalog=CATALOG, bad=bad)
    joined = "\n".join(out)
    assert "exactly one effect" in joined and "(it has deny, prefer)" in joined
    assert "must name its `paths`" in joined
    assert "needs a `severity`" in joined


def test_deny_without_refs_is_a_warning(tmp_path: Path) -> None:
    p = load(
        tmp_path,
        catalog=CATALOG,
        r="rules:\n  - id: x\n    deny: triton\n    severity: perf\n    because: y\n",
    )
    assert [d.code for d in p.warnings] == ["missing-refs"]
    assert p.warnings[0].level == "warning"


def test_duplicate_rule_ids_across_files(tmp_path: Path) -> None:
    rule = "rules:\n  - id: same\n    deny: triton\n    severity: perf\n    because: y\n    refs: [a#1]\n"
    out = errors(tmp_path, catalog=CATALOG, a=rule, b=rule)
    assert any("duplicate rule id `same`" in o for o in out)


def test_backend_on_wrong_path(tmp_path: Path) -> None:
    out = errors(
        tmp_path,
        catalog=CATALOG,
        r="rules:\n  - id: x\n    deny: triton\n    paths: [router]\n    severity: perf\n    because: y\n    refs: [a#1]\n",
    )
    assert any("backend `triton` does not exist on path `router`" in o for o in out)


def test_unknown_backend_id_in_catalog(tmp_path: Path) -> None:
    out = errors(tmp_path, catalog="backends:\n  - backend: tritan\n    paths: [moe]\n")
    assert out == ["catalog.yaml:2:14: error: `tritan` is not a backend id of path `moe` (rule `tritan`)"]


def test_version_number_must_be_quoted() -> None:
    with pytest.raises(ConditionError, match="reads as a number"):
        parse_condition({"triton.version": 3.10})


def test_bad_specifier() -> None:
    with pytest.raises(ConditionError, match="not a valid version specifier"):
        parse_condition({"triton.version": ">=3.x"})


class TestThreeValuedLogic:
    def test_unknown_fact_is_unknown(self) -> None:
        c = parse_condition({"gpu.family": "sm120", "deep_gemm.has_sm120_sf_layout": False})
        assert evaluate(c, {"gpu.family": "sm120"}) is None
        assert evaluate(c, {"gpu.family": "sm90"}) is False  # false wins over unknown in `all`
        assert evaluate(c, {"gpu.family": "sm120", "deep_gemm.has_sm120_sf_layout": False}) is True

    def test_any_and_not(self) -> None:
        c = parse_condition({"any": [{"gpu.sm": "sm90"}, {"triton.version": ">=3.6"}]})
        assert evaluate(c, {"triton.version": Version("3.6.0")}) is True  # true wins over unknown
        assert evaluate(c, {"gpu.sm": "sm121"}) is None
        n = parse_condition({"not": {"gpu.sm": "sm90"}})
        assert evaluate(n, {}) is None
        assert evaluate(n, {"gpu.sm": "sm121"}) is True

    def test_comparisons_and_lists(self) -> None:
        c = parse_condition({"model.hidden_size": ">= 4096", "quant.block": [128, 128], "vllm.cuda_archs": "sm_120"})
        assert (
            evaluate(
                c,
                {
                    "model.hidden_size": 4096,
                    "quant.block": (128, 128),
                    "vllm.cuda_archs": ("sm_90", "sm_120"),
                },
            )
            is True
        )
        assert (
            evaluate(
                c,
                {
                    "model.hidden_size": 2048,
                    "quant.block": (128, 128),
                    "vllm.cuda_archs": ("sm_120",),
                },
            )
            is False
        )

    def test_version_any_of(self) -> None:
        c = parse_condition({"vllm.version": ["0.24.0", ">=0.27,<0.28"]})
        assert evaluate(c, {"vllm.version": Version("0.27.1")}) is True
        assert evaluate(c, {"vllm.version": Version("0.24")}) is True
        assert evaluate(c, {"vllm.version": Version("0.26.0")}) is False


def test_shipped_rules_load_clean(policy: kp.Policy) -> None:
    assert policy.warnings == ()
    assert all(r.refs for r in policy.rules if r.kind == "deny" and r.layer == "shipped")
    assert {"dense", "moe", "router"} <= set(policy.backends)


def test_field_errors_and_meaning_errors_in_one_pass(tmp_path: Path) -> None:
    """A misspelt field does not hide a misspelt fact key or backend of the same rule."""
    bad = """
rules:
  - id: one
    when: {gpu.famly: sm120}
    deny: deep_gem
    severity: crash
    becuase: x
    refs: [a#1]
"""
    out = errors(tmp_path, catalog=CATALOG, bad=bad)
    assert out == [
        "bad.yaml:3:5: error: missing field `because` (rule `one`)",
        "bad.yaml:4:12: error: unknown fact key `gpu.famly` (rule `one`)",
        "bad.yaml:5:11: error: no path has a backend `deep_gem` (rule `one`)",
        "bad.yaml:7:5: error: unknown field `becuase` (rule `one`)",
    ]


def test_bad_severity_is_not_also_a_missing_severity(tmp_path: Path) -> None:
    bad = "rules:\n  - id: one\n    deny: triton\n    severity: fatal\n    because: x\n    refs: [a#1]\n"
    out = errors(tmp_path, catalog=CATALOG, bad=bad)
    assert len(out) == 1 and "`severity`: input should be" in out[0]


@pytest.mark.parametrize("spelling", ["off", "no", "On", "YES"])
def test_yaml11_boolean_env_value_is_a_warning(tmp_path: Path, spelling: str) -> None:
    rule = (
        "rules:\n  - id: env-off\n    when: {any: [{deploy.env.VLLM_USE_DEEP_GEMM: %s}]}\n"
        "    deny: deep_gemm\n    severity: perf\n    because: x\n    refs: [a#1]\n"
    )
    policy = load(tmp_path, catalog=CATALOG, rules=rule % spelling)
    (w,) = [d for d in policy.warnings if d.code == "yaml-boolean"]
    as_str = "true" if spelling.lower() in ("on", "yes") else "false"
    assert w.one_line().endswith(
        f"rules.yaml:3:50: warning: `{spelling}` is a YAML 1.1 boolean: `deploy.env.VLLM_USE_DEEP_GEMM` "
        f"is compared with the string `{as_str}` (rule `env-off`)"
    )
    assert w.help == f'quote it (`"{spelling}"`) to compare with `{spelling}`'


@pytest.mark.parametrize("value", ["false", '"off"', "'0'"])
def test_env_values_as_meant_are_no_warning(tmp_path: Path, value: str) -> None:
    rule = (
        "rules:\n  - id: env\n    when: {deploy.env.VLLM_USE_DEEP_GEMM: %s}\n"
        "    deny: deep_gemm\n    severity: perf\n    because: x\n    refs: [a#1]\n"
    )
    policy = load(tmp_path, catalog=CATALOG, rules=rule % value)
    assert not [d for d in policy.warnings if d.code == "yaml-boolean"]


def test_an_entry_that_is_not_a_mapping_keeps_the_next_entries_on_their_lines(tmp_path: Path) -> None:
    # found by the loader fuzz: a skipped scalar entry shifted the partial entries after it, so
    # `{}` was taken for a complete entry and the compiler crashed on its missing `paths`
    bad = """
backends:
  - 3
  - {backend: triton}
  - backend: deep_gemm
    paths: [dense, moe]
    requires: {gpu.famly: sm90}
"""
    out = errors(tmp_path, bad=bad)
    assert out[0].startswith("bad.yaml:3:5: error:") and "dictionary" in out[0]
    assert out[1].startswith("bad.yaml:4:5: error: missing field `paths`")
    assert out[2].startswith("bad.yaml:7:16: error: unknown fact key `gpu.famly`")
    assert len(out) == 3
