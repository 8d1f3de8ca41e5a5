"""The static checks' settings hold what issue 25 asks of them: CI runs ruff and mypy after the install and before the
tests, the core is checked with mypy's strict flags and is never among the modules still waived, every waived module
exists (the list cannot keep a name after a module moves), and the package says it is typed (py.typed)."""

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
# source folder of each part of the gapbench namespace ([tool.setuptools.package-dir])
FOLDERS = {"gapbench.adapters": ROOT / "adapters", "gapbench.tasks": ROOT / "tasks", "gapbench": ROOT / "harness"}


def _waived() -> list[str]:
    return [m for o in OVERRIDES if o.get("ignore_errors") for m in o["module"]]


def test_the_core_is_checked_strictly_and_never_waived():
    strict = [o for o in OVERRIDES if all(o.get(flag) is True for flag in STRICT_FLAGS)]
    assert len(strict) == 1 and CORE <= set(strict[0]["module"])
    waived = _waived()
    for core in CORE:
        assert not [m for m in waived if m == core or core.endswith(".*") and m.startswith(core[:-1])], core


def test_every_waived_module_exists():
    for module in _waived():
        package = next(p for p in FOLDERS if module == p or module.startswith(p + "."))
        parts = module[len(package):].lstrip(".").split(".") if module != package else []
        base = FOLDERS[package].joinpath(*parts)
        assert base.with_suffix(".py").is_file() or (base / "__init__.py").is_file(), module


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
