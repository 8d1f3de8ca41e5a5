"""gapbench as users install it. The sdist, and the wheel built from that sdist, carry every module and data file; a
fresh virtual environment gets the wheel alone (`pip install gapbench`) and its dependencies from the package registries
(pinned by constraints/ci.txt) and runs the core commands from a folder outside the checkout, so nothing is imported or
read from the source tree, and the commands that need an extra name it. The commands that need the extras run from a
second fresh venv that holds the wheel, its dependencies and extras coming from the test environment's site-packages
(installed by CI from the same lock file), so that torch and spaCy are not installed again. Also: CI runs the README's
set-up commands exactly as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints" / "ci.txt"
TASK = "impliret/multispeaker/wknow"
# source folder -> package folder inside the wheel
PACKAGES = {"harness": "gapbench", "tasks": "gapbench/tasks", "adapters": "gapbench/adapters"}


def _shipped_files() -> dict[str, str]:
    """Every module and run-time data file of the checkout: checkout path -> path inside the wheel."""
    out = {}
    for folder, package in PACKAGES.items():
        for src in sorted((ROOT / folder).rglob("*")):
            rel = src.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts or not src.is_file():
                continue
            if src.suffix == ".py" or rel.parts[0] == "data" or rel.parts[:2] == ("llm", "prompts"):
                out[f"{folder}/{rel.as_posix()}"] = f"{package}/{rel.as_posix()}"
    return out


# ---------------------------------------------------------------- CI runs the README's commands
def _readme_setup_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Set up"):text.index("\n## ", text.index("## Set up") + 1)]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def test_ci_runs_the_readme_setup_commands_verbatim():
    install, test = _readme_setup_blocks()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert install in ci and test in ci
    assert ci.index(install) < ci.index(test)
    assert "-c constraints/ci.txt" in install and "sudo" in install and "apt-get update" in install
    assert test.strip() == "HF_HUB_OFFLINE=1 python -m pytest -q -n 2"
    assert "set -euo pipefail" in ci and "CI=true" in ci and "HF_HUB_OFFLINE=1" in ci


def test_constraints_pin_every_package_exactly():
    pins = [line for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][A-Za-z0-9.]*", p) for p in pins), pins
    names = {p.split("==")[0].lower().replace("_", "-") for p in pins}
    # the libraries that broke or can break us are pinned, and the project itself is not
    assert {"torch", "typer", "click", "numpy", "bm25s", "ir-measures", "sentence-transformers"} <= names
    assert "gapbench" not in names
    assert "torch==2.13.0" in pins  # the README's torch, without the +cpu label of a local build


def _extras() -> dict[str, set[str]]:
    """pyproject.toml's extras, each with the distributions it brings, its gapbench[...] references followed."""
    from setuptools.config.pyprojecttoml import read_configuration

    raw = read_configuration(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    name = lambda req: re.match(r"[A-Za-z0-9._-]+", req).group(0).lower().replace("_", "-")

    def brings(extra: str) -> set[str]:
        out: set[str] = set()
        for req in raw[extra]:
            inner = re.fullmatch(r"gapbench\[([^\]]+)\]", req)
            out |= set().union(*(brings(e) for e in inner.group(1).split(","))) if inner else {name(req)}
        return out

    return {extra: brings(extra) for extra in raw}


def test_a_missing_optional_module_names_an_extra_that_brings_it():
    from gapbench.extras import COMMAND_EXTRAS, OPTIONAL_MODULES, missing_dependency

    extras = _extras()
    for module, (package, extra) in OPTIONAL_MODULES.items():
        assert package in extras[extra], (module, extra)
    for command in COMMAND_EXTRAS:
        assert command in extras
    missing = lambda module: ModuleNotFoundError(f"No module named {module!r}", name=module)
    assert str(missing_dependency(missing("sklearn.linear_model"), ["signals"])) == (
        "gapbench signals needs the package 'scikit-learn', which is not installed. "
        "Install it with: pip install 'gapbench[signals]'")
    assert str(missing_dependency(missing("torch"), ["run", "beir/scifact"])) == (
        "gapbench run needs the package 'torch', which is not installed. "
        "Install it with: pip install 'gapbench[dense]'")
    # gapbench's own modules, and modules no extra provides, stay tracebacks: they are bugs, not set-up
    assert missing_dependency(missing("gapbench.nope"), ["run"]) is None
    assert missing_dependency(missing("numpy"), ["run"]) is None


# ---------------------------------------------------------------- the sdist and the wheel
_BUILD = """
import os, sys, tarfile
from setuptools import build_meta
out, unpacked = sys.argv[1:]
sdist = build_meta.build_sdist(out)
with tarfile.open(os.path.join(out, sdist)) as tar:
    tar.extractall(unpacked, filter="data")
os.chdir(os.path.join(unpacked, sdist[: -len(".tar.gz")]))
build_meta.build_wheel(out)
"""


def _build_dists(base: Path) -> None:
    """An sdist built from a copy of the sources, and the wheel built from that sdist unpacked, as `python -m build`
    does (one process calling setuptools' build hooks: `pip wheel` took 11 s more to start and unpack)."""
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in PACKAGES:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-c", _BUILD, str(base / "out"), str(base / "unpacked")], cwd=src, check=True,
                   capture_output=True)


@pytest.fixture(scope="session")
def dists(once_per_session) -> dict[str, Path]:
    """Built once per test session, whichever xdist worker asks first (tests/fx_models.py); the fresh venvs below take
    minutes each, so they are made once too, and each test runs their commands from a folder of its own."""
    out = once_per_session("dists", _build_dists) / "out"
    return {"sdist": next(out.glob("gapbench-*.tar.gz")), "wheel": next(out.glob("gapbench-*.whl"))}


@pytest.mark.slow
def test_sdist_and_wheel_carry_every_module_and_data_file(dists):
    shipped = _shipped_files()
    data = [f for f in shipped if not f.endswith(".py")]
    # today: 28 data files (ImpliRet, RAR-b MCR, the ARGUS slice and KB, with provenance) and 5 prompt templates
    assert len(data) >= 33 and "tasks/data/argus/kb_wikipedia_first_paragraphs.jsonl" in shipped
    with tarfile.open(dists["sdist"]) as tar:
        top = dists["sdist"].name[: -len(".tar.gz")]
        in_sdist = {n[len(top) + 1:] for n in tar.getnames()}
    assert sorted(set(shipped) - in_sdist) == []
    in_wheel = set(zipfile.ZipFile(dists["wheel"]).namelist())
    assert sorted(set(shipped.values()) - in_wheel) == []
    assert not any(n.startswith(("harness/", "tasks/", "adapters/", "tests/")) for n in in_wheel)
    # PEP 561: the marker that tells type checkers the package is typed, in the sdist and the wheel
    assert "harness/py.typed" in in_sdist and "gapbench/py.typed" in in_wheel
    entry = next(n for n in in_wheel if n.endswith(".dist-info/entry_points.txt"))
    assert "gapbench = gapbench.__main__:entry" in zipfile.ZipFile(dists["wheel"]).read(entry).decode()
    # every extra with the packages pyproject.toml gives it: the venv that runs the commands needing extras takes them
    # from the test environment, so the wheel's own metadata is checked here
    from email.parser import Parser

    from packaging.requirements import Requirement
    from setuptools.config.pyprojecttoml import read_configuration

    meta = next(n for n in in_wheel if n.endswith(".dist-info/METADATA"))
    requires = Parser().parsestr(zipfile.ZipFile(dists["wheel"]).read(meta).decode()).get_all("Requires-Dist")
    declared = read_configuration(ROOT / "pyproject.toml")["project"]["optional-dependencies"]

    def bare(req: Requirement) -> str:  # the requirement without its marker
        return str(req).split(";")[0].strip()

    for extra, reqs in declared.items():
        in_meta = {bare(r) for r in map(Requirement, requires) if r.marker and r.marker.evaluate({"extra": extra})}
        assert in_meta == {bare(Requirement(q)) for q in reqs}, extra


# ---------------------------------------------------------------- installed in a fresh venv, used from elsewhere
def _clean_env() -> dict[str, str]:
    """This environment less what would point Python elsewhere than the venv, and less PYTHONDONTWRITEBYTECODE: the
    venv's modules are byte-compiled by the first command that imports them and reused by the next ones, as in a
    user's venv (pip installs without compiling, below)."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _pip(venv: Path, *args: str, cwd: Path) -> None:
    """pip is this interpreter's, pointed at the venv (``pip --python``): the venv needs no copy of its own (ensurepip
    took half a minute)."""
    env = {**_clean_env(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           *args], env=env, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _fresh_venv(base: Path, wheel: Path) -> None:
    """`pip install gapbench` in a fresh venv at ``base / "venv"``: the wheel and its dependencies from the package
    registries, pinned by the lock file."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    # nothing is byte-compiled at install time (``--no-compile``: the first command that imports a module compiles it)
    _pip(venv, "--no-compile", "-c", str(CONSTRAINTS), str(wheel), cwd=base)


def _venv_with_this_environments_packages(base: Path, wheel: Path) -> None:
    """A fresh venv at ``base / "venv"`` holding the wheel alone (``--no-deps``), whose dependencies and extras are
    this test environment's: a ``.pth`` file appends its site-packages to the venv's path, after the venv's own, so
    gapbench is the wheel's. Only the folders are appended: the environment's own ``.pth`` files, among them the
    editable install's finder that maps ``gapbench`` to the checkout, are not run. (Installing torch, transformers and
    spaCy again took a minute.)"""
    import sysconfig

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    _pip(venv, "--no-deps", "--no-index", str(wheel), cwd=base)  # byte-compiled once here, not by two tests at once
    [site] = (venv / "lib").glob("python*/site-packages")
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "zz_test_environment.pth").write_text("".join(f"{path}\n" for path in ours))


def _used_from(venv: Path, base: Path) -> dict:
    """``venv`` seen from a folder outside the checkout (``base / "work"``), with a GAPBENCH_HOME of its own."""
    work = base / "work"
    work.mkdir()
    env = _clean_env()
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), HF_HUB_OFFLINE="1",
               GAPBENCH_HOME=str(base / "home"), PIP_DISABLE_PIP_VERSION_CHECK="1")

    def gapbench(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run([str(venv / "bin" / "gapbench"), *args], env=env, cwd=work, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == expect, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    return {"venv": venv, "work": work, "env": env, "gapbench": gapbench}


@pytest.fixture(scope="session")
def installed_venv(dists, once_per_session) -> Path:
    """The wheel, with the extras the commands below need (argus, report) from this environment: one venv for the
    session, which each test below uses from a folder of its own."""
    folder = once_per_session("installed", lambda base: _venv_with_this_environments_packages(base, dists["wheel"]))
    return folder / "venv"


@pytest.fixture
def installed(installed_venv, tmp_path):
    return _used_from(installed_venv, tmp_path)


@pytest.fixture
def core(dists, once_per_session, tmp_path):
    """`pip install gapbench` alone: no extras, no torch, and (with today's typer) no click."""
    venv = once_per_session("core", lambda base: _fresh_venv(base, dists["wheel"])) / "venv"
    return _used_from(venv, tmp_path)


@pytest.mark.slow
def test_imports_come_from_the_venv_not_the_checkout(installed):
    # the distribution found first (its version and entry points) is the wheel's too, not the checkout's editable one
    code = ("import json, gapbench, gapbench.tasks, gapbench.adapters, gapbench.cli, importlib.metadata as m\n"
            "print(json.dumps([gapbench.__file__, gapbench.tasks.__file__, gapbench.adapters.__file__,\n"
            "                  str(m.distribution('gapbench').locate_file('gapbench/__init__.py'))]))")
    done = subprocess.run([str(installed["venv"] / "bin" / "python"), "-c", code], env=installed["env"],
                          cwd=installed["work"], capture_output=True, text=True, check=True)
    site = installed["venv"] / "lib"
    for path in json.loads(done.stdout):
        assert Path(path).is_relative_to(site) and "site-packages" in path, path


@pytest.mark.slow
def test_tasks_run_and_evaluate(installed):
    gapbench, work = installed["gapbench"], installed["work"]
    listing = json.loads(gapbench("tasks", "--json").stdout)
    suites = {s["name"]: s["tasks"] for s in listing["suites"]}
    assert len(suites["impliret"]) == 6 and TASK in suites["impliret"]
    assert "rarb-mcr/piqa" in {t["name"] for t in listing["tasks"]}

    run = json.loads(gapbench("run", TASK, "-r", "bm25", "-o", "run-bm25", "--json").stdout)
    assert run["n_queries"] == 1500
    # the shipped ImpliRet slice read from the wheel gives the pinned BM25 figures (tests/test_leaderboard.py)
    assert run["measures"]["nDCG@10"] == pytest.approx(0.1518, abs=5e-5)
    assert run["measures"]["R@100"] == pytest.approx(0.9827, abs=5e-5)
    assert {p.name for p in (work / "run-bm25").iterdir()} >= {"run.trec.gz", "manifest.json", "results.json"}

    # (gapbench evaluate on that run file, from the same wheel: the core install's test below)
    report = gapbench("report", TASK, "run-bm25", "--out", "report")
    assert "1 systems" in report.stdout
    rep = json.loads((work / "report" / "report.json").read_text())
    assert rep["systems"][0]["measures"] == run["measures"]
    assert rep["per_query"]["distribution"]["bm25"]["n"] == 1500
    assert (work / "report" / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert all((work / "report" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in rep["figures"])


@pytest.mark.slow
@pytest.mark.model
def test_argus_audit_and_probe_read_the_shipped_slice(installed):
    gapbench, work = installed["gapbench"], installed["work"]
    audit = json.loads(gapbench("argus", "audit", "-r", "random", "--out", "audit", "--json").stdout)
    # the vendored slice: 620 paragraphs, 103 targets, 695 relations; chance is k / N_effective averaged over pairs
    assert (audit["n_entities"], audit["n_targets"], audit["n_pairs"]) == (620, 103, 695)
    assert audit["chance"] == pytest.approx(0.0812077, abs=1e-6)
    assert {p.name for p in (work / "audit").iterdir()} >= {"argus_audit.json", "argus_audit.md", "argus_lda.png"}

    probe = json.loads(gapbench("argus", "probe", "-r", "random", "--families", "ridge", "--datasets", "directed",
                                "--out", "probe", "--json").stdout)
    # the 103 audited targets, split about 70/15/15 (the authors' split, the default since issue 14) by the seed
    assert probe["split"] == {"train": 72, "validation": 15, "test": 16}
    assert probe["selected"]["family"] == "ridge" and (work / "probe" / "probe" / "probe.json").is_file()


@pytest.mark.slow
def test_packaged_prompts_and_kb_load(installed):
    code = ("import json; from gapbench.llm.client import available_prompts, load_prompt\n"
            "from gapbench.analyses.argus.remedy.kb import ReferenceKB\n"
            "print(json.dumps({'prompts': available_prompts(), 'listwise': len(load_prompt('listwise_rank')),\n"
            "                  'kb': len(ReferenceKB.packaged().passages),\n"
            "                  'oracle': len(ReferenceKB.packaged('landmarks-oracle').passages)}))")
    done = subprocess.run([str(installed["venv"] / "bin" / "python"), "-c", code], env=installed["env"],
                          cwd=installed["work"], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    assert got["prompts"] == sorted(p.stem for p in (ROOT / "harness" / "llm" / "prompts").glob("*.txt"))
    assert got["listwise"] == len((ROOT / "harness" / "llm" / "prompts" / "listwise_rank.txt").read_text(encoding="utf-8"))
    def lines(*parts: str) -> int:
        text = (ROOT / "tasks" / "data" / Path(*parts)).read_text(encoding="utf-8")
        return sum(1 for line in text.splitlines() if line.strip())

    # the default KB is the general Wikipedia slice; the landmark KB is the named pipeline check
    assert got["kb"] == lines("argus", "kb_wikipedia_first_paragraphs.jsonl") == 620
    assert got["oracle"] == lines("argus_kb", "landmarks_kb.jsonl") == 97


@pytest.mark.slow
def test_submit_validate_a_shipped_submission(installed):
    gapbench, work = installed["gapbench"], installed["work"]
    shutil.copytree(ROOT / "leaderboards" / "impliret" / "submissions" / "bm25", work / "sub")
    # the installed validator rejects (that it accepts the submission as shipped: the core install's test below) a run
    # file whose bytes no longer match its recorded sha256
    run = work / "sub" / "runs" / "impliret__multispeaker__wknow.trec.gz"
    run.write_bytes(run.read_bytes() + b"\0")
    bad = gapbench("submit", "validate", "sub", expect=2)
    assert "sha256 mismatch for runs/impliret__multispeaker__wknow.trec.gz" in bad.stderr
    # submit validate's layout: one summary line, then each file as a heading and one indented line per error
    lines = bad.stderr.splitlines()
    assert lines[0] == "gapbench: error: invalid submission sub: 1 error in 1 file (exit 2)"
    assert lines[1] == "sub/submission.json:" and lines[2].startswith("  task 'impliret/multispeaker/wknow': sha256")
    assert len(lines) == 3


@pytest.mark.slow
def test_core_install_runs_bm25_and_names_the_extra_it_lacks(core):
    gapbench, work = core["gapbench"], core["work"]
    code = ("import json, gapbench, importlib.metadata as m\n"
            "print(json.dumps([gapbench.__file__, sorted(f'{d.name}=={d.version}' for d in m.distributions())]))")
    done = subprocess.run([str(core["venv"] / "bin" / "python"), "-c", code], env=core["env"], cwd=work,
                          capture_output=True, text=True, check=True)
    where, installed = json.loads(done.stdout)
    assert Path(where).is_relative_to(core["venv"] / "lib") and "site-packages" in where, where
    # the lock file decided the versions: typer (whose vendored click broke the CLI once) is the pinned one, and so is
    # every other package pip installed that the lock file names
    pinned = {name.lower().replace("_", "-"): version for name, version in
              (line.split("==") for line in CONSTRAINTS.read_text().splitlines() if "==" in line)}
    versions = {d.split("==")[0].lower().replace("_", "-"): d.split("==")[1] for d in installed}
    assert versions["typer"] == pinned["typer"]
    assert {n: v for n, v in versions.items() if n in pinned and v != pinned[n]} == {}
    run = json.loads(gapbench("run", TASK, "-r", "bm25", "-o", "run-bm25", "--json").stdout)
    assert run["measures"]["nDCG@10"] == pytest.approx(0.1518, abs=5e-5)
    evaluated = json.loads(gapbench("evaluate", "--run", "run-bm25/run.trec.gz", "--task", TASK, "--json").stdout)
    assert evaluated["n_queries"] == 1500 and evaluated["measures"] == run["measures"]
    shutil.copytree(ROOT / "leaderboards" / "impliret" / "submissions" / "bm25", work / "sub")
    assert json.loads(gapbench("submit", "validate", "sub", "--json").stdout) == {"ok": True, "problems": []}
    # a usage error is one line whichever click typer brings (the bug of typer 0.29's vendored click)
    usage = gapbench("run", TASK, "-r", "bm25", "--bogus", expect=2)
    assert usage.stderr.startswith("gapbench: error: no such option '--bogus'") and usage.stderr.count("\n") == 1
    # ARGUS's audit itself needs only the core; its plot and the probes need the argus extra
    audit = json.loads(gapbench("argus", "audit", "-r", "random", "--no-plot", "--out", "audit", "--json").stdout)
    assert (audit["n_entities"], audit["n_targets"], audit["n_pairs"]) == (620, 103, 695)
    # commands that need an extra say which one, in one line
    needs = "needs the package {!r}, which is not installed. Install it with: pip install 'gapbench[{}]'"
    for args, message in (
        (("report", TASK, "run-bm25", "--out", "report"), "gapbench report " + needs.format("matplotlib", "report")),
        (("argus", "audit", "-r", "random", "--out", "audit"), "gapbench argus " + needs.format("matplotlib", "argus")),
        (("argus", "probe", "-r", "random", "--out", "probe"),
         "gapbench argus " + needs.format("scikit-learn", "argus")),
        (("run", TASK, "-r", "dense"), "The dense retriever " + needs.format("sentence-transformers", "dense")),
    ):
        assert gapbench(*args, expect=2).stderr == f"gapbench: error: {message}\n"
    assert not (work / "report").exists()
