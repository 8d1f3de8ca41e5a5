"""The documentation runs as written: every shell and Python block of the docs site and of every README is marked, and
the runnable ones run here as a user would (tests/docs_blocks.py says how); every `gapbench` command the docs name
exists with the flags they give it; the site builds with ``mkdocs build --strict``; every page is in its navigation.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docs_blocks import PYTHON, ROOT, SHELL, WHOLE_PAGE, MarkerError, blocks, pages, run_page


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def test_every_block_is_marked():
    problems = []
    for page in pages():
        try:
            blocks(page)
        except MarkerError as e:  # names the file and line
            problems.append(str(e))
    assert not problems, "\n".join(problems)


def test_markers_are_read_and_a_missing_one_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<!-- run: slow, copy=tests/fixtures/beir/scifact -->\n```bash\necho hi\n```\n\n"
                    "<!-- not run: needs\na GPU -->\n```python\nprint(1)\n```\n\n```text\nnot code\n```\n\n"
                    "<!-- run by tests: name-1 -->\n```sh\nls\n```\n", encoding="utf-8")
    found = blocks(page)
    assert [(b.line, b.lang, b.kind, b.code) for b in found] == [(4, "bash", "run", "echo hi\n"),
                                                               (10, "python", "not run", "print(1)\n"),
                                                               (19, "sh", "run by tests", "ls\n")]
    assert found[0].slow and found[0].options["copy"] == ["tests/fixtures/beir/scifact"]
    assert found[1].reason == "needs a GPU" and found[2].name == "name-1"
    page.write_text("# t\n\nSome text.\n```python\nprint(1)\n```\n", encoding="utf-8")
    with pytest.raises(MarkerError, match=r"page.md:4: a python block without a marker"):
        blocks(page)
    page.write_text("<!-- run: fast -->\n```bash\nls\n```\n", encoding="utf-8")
    with pytest.raises(MarkerError, match=r"page.md:2: unknown run option 'fast'"):
        blocks(page)
    page.write_text("<!-- not run: -->\n```bash\nls\n```\n", encoding="utf-8")
    with pytest.raises(MarkerError, match="is not one of"):
        blocks(page)


def test_the_readme_is_a_front_door():
    """At most 150 lines: what gapbench is, the set-up, three commands, one Python example, links to the docs."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert len([b for b in blocks(ROOT / "README.md") if b.lang in PYTHON]) == 1
    for link in re.findall(r"\]\((docs/[^)#]+)", text):  # every docs link names a page that exists
        assert (ROOT / link).is_file(), link


def test_pages_are_found():
    names = {_rel(p) for p in pages()}
    assert {"README.md", "leaderboards/README.md", "benchmarks/README.md", "docs/index.md",
            "docs/ci-regression.md"} <= names
    assert not any(n.startswith((".venv/", "tests/fixtures/")) for n in names)


def test_blocks_run_by_their_own_test_are_named_there():
    tests = {p: p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py") if p.name != "test_docs.py"}
    for page in pages():
        for b in _marked(page):
            if b.kind != "run by tests" or b.name == Path(WHOLE_PAGE.get(_rel(page), ("-",))[0]).name:
                continue
            parts = page.relative_to(ROOT).parts
            owners = [p for p, text in tests.items()
                      if (_rel(page) in text
                          or all(f'"{part}"' in text or f"/{part}" in text or f"'{part}'" in text for part in parts))
                      and (f'"{b.name}"' in text or f"'{b.name}'" in text)]
            assert owners, f"{b.where}: no test file names {'/'.join(parts)} and the block {b.name!r}"
    for page, (test, langs) in WHOLE_PAGE.items():  # that test reads the page and finds every block of its language
        text = (ROOT / test).read_text(encoding="utf-8")
        assert all(f'"{part}"' in text for part in Path(page).parts), (page, test)
        assert any(f"```{lang}\\n" in text for lang in langs), (page, test)


def test_every_script_under_leaderboards_is_run():
    code = "\n".join(b.code for page in pages() for b in _marked(page) if b.kind != "not run")
    for script in sorted((ROOT / "leaderboards").rglob("*.py")):
        assert _rel(script) in code or f"python {script.name}" in code, f"{_rel(script)} is run by no docs block"


def _marked(page: Path) -> list:
    try:
        return blocks(page)
    except MarkerError:
        return []  # test_every_block_is_marked says where


def _runnable_pages():
    out = []
    for page in pages():
        try:
            todo = [b for b in blocks(page) if b.kind == "run"]
        except MarkerError:
            continue  # test_every_block_is_marked says where
        if todo:
            marks = [pytest.mark.slow] if any(b.slow for b in todo) else []
            out.append(pytest.param(page, id=_rel(page), marks=marks))
    return out


@pytest.mark.parametrize("page", _runnable_pages())
def test_page_runs_as_written(page, tmp_path, docs_cache):
    # docs_cache: a page that runs dense on a shipped task finds its vectors cached, one that runs `argus compare` on
    # wknow its mentions (tests/fx_docs.py), computed once a session
    ran = run_page(page, tmp_path / "work")
    assert ran and all(out.returncode == 0 for _, out in ran)


# ------------------------------------------------------------------------------------ commands and flags named
def _cli():
    import typer

    from gapbench.cli import app

    return typer.main.get_command(app)


FENCED = re.compile(r"^[ \t]*(`{3,})([^\n`]*)\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
START = re.compile(r"(?:^|&&|\|\||;|\(|\$ )\s*(?:[A-Z_]+=\S+\s+)*(gapbench\s[^;&|#>]*)")


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """(where, argv) of every `gapbench ...` command: in shell blocks, and in the prose's inline code."""
    pieces = [code for _, info, code in FENCED.findall(text) if info.strip().split()[:1] in ([s] for s in SHELL)]
    prose = FENCED.sub("", text)
    pieces += [span for span in re.findall(r"`([^`\n]+)`", prose)]
    out = []
    for piece in pieces:
        for line in piece.replace("\\\n", " ").splitlines():
            for m in START.finditer(line.replace("\\|", "|")):
                try:
                    argv = shlex.split(m.group(1), comments=True)
                except ValueError:
                    continue
                out.append((line.strip()[:100], argv))
    return out


def _check(cli, argv: list[str]) -> str | None:
    cmd, i = cli, 1  # typer carries its own click (typer._click): groups are known by their commands
    while hasattr(cmd, "commands") and i < len(argv) and not argv[i].startswith("-"):
        if argv[i] not in cmd.commands:
            return f"no command {' '.join(argv[:i + 1])!r}"
        cmd, i = cmd.commands[argv[i]], i + 1
    opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for arg in argv[i:]:
        if arg.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", arg) and arg not in ("-",):
            flag = arg.split("=", 1)[0]
            if flag not in opts and not (len(flag) > 2 and flag[1] != "-" and flag[:2] in opts):
                return f"{' '.join(argv[:i])}: no option {flag}"
    return None


def test_every_command_and_flag_the_docs_name_exists():
    cli = _cli()
    problems = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for where, argv in _commands(text):
            if argv[:1] == ["gapbench"] and argv[1:2] != ["..."] and (problem := _check(cli, argv)):
                problems.append(f"{_rel(page)}: {problem}  [{where}]")
    assert not problems, "\n".join(problems)


# flags of other tools that the pages name in passing: pip's, mkdocs', benchmarks/bench_scale.py's, the test suite's
OTHER_TOOLS = {"--help", "--index-url", "--no-deps", "--strict", "--sizes", "--write-slow-list"}


def test_every_flag_named_in_the_prose_exists():
    """A flag named alone in the prose (`--pool-depth`) is one of gapbench's options, of some command."""
    opts: set[str] = set()

    def walk(cmd):
        for p in getattr(cmd, "params", []):
            opts.update((*p.opts, *p.secondary_opts))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(_cli())
    problems = []
    for page in pages():
        if _rel(page).startswith("benchmarks/"):  # the benchmark scripts' own flags
            continue
        for span in re.findall(r"`([^`\n]+)`", FENCED.sub("", page.read_text(encoding="utf-8"))):
            problems += [f"{_rel(page)}: {flag}" for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span)
                         if flag not in opts | OTHER_TOOLS]
    assert not problems, "\n".join(problems)


def test_the_flag_check_catches_a_wrong_flag():
    cli = _cli()
    assert _check(cli, ["gapbench", "run", "TASK", "-r", "bm25", "--output", "x"]) is None
    assert _check(cli, ["gapbench", "run", "TASK", "--retrievers", "bm25"]) == "gapbench run: no option --retrievers"
    assert _check(cli, ["gapbench", "argus", "sweepx"]) == "no command 'gapbench argus sweepx'"
    text = "Try `gapbench cache info --json`.\n\n```bash\nX=1 gapbench run T -r bm25 \\\n  -o out 2> log # note\n```\n"
    assert [argv for _, argv in _commands(text)] == [["gapbench", "run", "T", "-r", "bm25", "-o", "out", "2"],
                                                     ["gapbench", "cache", "info", "--json"]]


# ------------------------------------------------------------------------------------ the site
CONFIG = ROOT / "docs" / "mkdocs.yml"


def _nav_files(nav) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    listed = {f for f in _nav_files(config["nav"]) if not f.startswith("http")}
    pages_here = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages_here == listed


def test_the_site_builds_strict(tmp_path):
    # as CI runs it, from the root with the relative path (docs/mkdocs.yml's comment says why it must be relative)
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", "docs/mkdocs.yml", "-d",
                          str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "schemas" / "gap.schema.json").is_file()  # the JSON Schemas are served as files


def test_the_schemas_page_links_every_schema():
    text = (ROOT / "docs" / "schemas.md").read_text(encoding="utf-8")
    for schema in sorted((ROOT / "docs" / "schemas").glob("*.schema.json")):
        assert f"](schemas/{schema.name})" in text, f"docs/schemas.md does not list {schema.name}"
