"""The static checks' settings hold what issue 25 asks of them: CI runs ruff and mypy after the install and before the
tests, the core is checked with mypy's strict flags, no module's errors are waived (ignore_errors), and the package
says it is typed (py.typed)."""

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - requires-python is >=3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
OVERRIDES = CONFIG["tool"]["mypy"]["overrides"]
CORE = {"gapbench.runner", "gapbench.evaluation.*", "gapbench.store", "gapbench.task", "gapbench.retrieval",
        "gapbench.types", "gapbench.contract"}
STRICT_FLAGS = ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls", "disallow_any_generics",
                "check_untyped_defs", "warn_return_any", "no_implicit_reexport", "strict_equality")


def test_the_core_is_checked_strictly_and_no_module_is_waived():
    strict = [o for o in OVERRIDES if all(o.get(flag) is True for flag in STRICT_FLAGS)]
    assert len(strict) == 1 and CORE <= set(strict[0]["module"])
    assert [o["module"] for o in OVERRIDES if o.get("ignore_errors")] == []
    # the only other overrides: third parties without type information
    assert [o for o in OVERRIDES if o not in strict and set(o) != {"module", "ignore_missing_imports"}] == []


def test_ci_runs_ruff_and_mypy_between_the_install_and_the_tests():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install, test = ci.index('pip install -c constraints/ci.txt -e ".[dev]"'), ci.index("python -m pytest -q -n 2")
    ruff, mypy = ci.index("\nruff check harness adapters tasks\n"), ci.index("\n.ci/typecheck\n")
    assert install < ruff < test and install < mypy < test
    assert CONFIG["tool"]["ruff"]["line-length"] == 120 and CONFIG["tool"]["ruff"]["target-version"] == "py310"
    assert set(CONFIG["tool"]["ruff"]["lint"]["select"]) == {"E", "F", "I", "UP"}


def test_the_package_is_marked_typed():
    assert (ROOT / "harness" / "py.typed").is_file()
    assert "py.typed" in CONFIG["tool"]["setuptools"]["package-data"]["gapbench"]
