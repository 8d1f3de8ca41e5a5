"""The code blocks of gapbench's documentation, read with their markers, and run as a user would run them.

Every ``bash``/``sh``/``shell``/``console`` and ``python``/``py``/``pycon`` block of a page (the docs site, every
README) carries an HTML comment on the line just above its opening fence, saying who runs it:

- ``<!-- run -->``: ``tests/test_docs.py`` runs it. The blocks of one page run in order in one working directory
  (an earlier block's ``-o runs/bm25`` is there for a later one): bash with ``bash -euo pipefail -c``, Python with the
  environment's ``python -c``; ``gapbench`` and ``python`` are the environment's, as in an activated shell, and
  ``HF_HUB_OFFLINE=1`` is set. A bash block whose lines change nothing of the shell's for the lines after them (no
  ``cd``, ``export``, ``VAR=value``, loops or functions) runs line by line, stopping at the first that fails, as
  ``-e`` would: each ``gapbench ARGS`` line with nothing for the shell to expand or redirect is ``gapbench.cli.main``
  called with those ARGS in the test's own process, in that directory and environment (what the ``gapbench`` script
  runs, without the ~1.5 s start and the 10 s or more of importing torch and sentence-transformers that each command
  would pay again), and every other line runs with ``bash -euo pipefail -c``. Options after a colon,
  comma-separated: ``slow`` (the page's test is marked slow: it loads a model or runs for minutes), ``llm=TASK``
  (``$OPENAI_BASE_URL`` and ``$OPENAI_MODEL`` name the real local test server, tests/llm_server.py, which judges by
  TASK's qrels: the endpoint a user brings), ``copy=PATH`` (the repository's file or folder PATH is copied into the
  working directory under its last name first).
- ``<!-- run by tests: NAME -->``: a test of its own runs the block and checks what it printed or wrote; it takes
  the block with ``block(PAGE, NAME)``. ``tests/test_docs.py`` checks that a test file names both the page and NAME.
- ``<!-- not run: REASON -->``: never run, with the reason (it needs the network, a GPU, a dump you download, or
  more time than a test may take). The reason may not be empty.

A block with no marker is an error naming the file and line, so no example rots unseen.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py", "pycon"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
MARKER = re.compile(r"<!--\s*(?P<body>.*?)\s*-->\s*$", re.S)
# folders that hold no documentation of gapbench (the environment, build output, vendored fixtures)
NOT_DOCS = {".venv", ".git", "build", "dist", "node_modules", "fixtures", "__pycache__", ".pytest_cache"}


# pages whose every block of a language a test of their own runs, checking what they print or compute: an unmarked block
# of that language there is that test's ("run by tests", named after the test file)
WHOLE_PAGE = {"docs/python-api.md": ("tests/test_python_api_docs.py", PYTHON),
              "docs/trec-eval.md": ("tests/test_trec_eval_compat.py", SHELL)}


class MarkerError(ValueError):
    """A block without a valid marker: the message names the file, the line and the accepted markers."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    kind: str  # "run", "run by tests" or "not run"
    name: str = ""  # NAME of "run by tests: NAME"
    reason: str = ""  # REASON of "not run: REASON"
    options: dict = field(default_factory=dict)  # of "run: ...": slow, llm, copy

    @property
    def where(self) -> str:
        return f"{_show(self.path)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in SHELL | PYTHON

    @property
    def slow(self) -> bool:
        return "slow" in self.options


ACCEPTED = ("'<!-- run -->' (options after a colon: slow, llm=TASK, copy=PATH), '<!-- run by tests: NAME -->' or "
            "'<!-- not run: REASON -->'")


def _show(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _marker(body: str, where: str) -> dict:
    body = " ".join(body.split())
    if body == "run" or body.startswith("run:"):
        options: dict = {}
        for item in filter(None, (s.strip() for s in body[4:].split(","))):
            key, _, value = item.partition("=")
            if key not in {"slow", "llm", "copy"} or (key == "slow") == bool(value):
                raise MarkerError(f"{where}: unknown run option {item!r}; accepted: slow, llm=TASK, copy=PATH")
            options.setdefault(key, []).append(value) if key == "copy" else options.__setitem__(key, value or True)
        return {"kind": "run", "options": options}
    if m := re.fullmatch(r"run by tests: ([A-Za-z0-9_.-]+)", body):
        return {"kind": "run by tests", "name": m.group(1)}
    if m := re.fullmatch(r"not run: (\S.*)", body):
        return {"kind": "not run", "reason": m.group(1)}
    raise MarkerError(f"{where}: the marker <!-- {body} --> is not one of {ACCEPTED}")


def blocks(path: Path) -> list[Block]:
    """Every shell and Python block of a Markdown file, with its marker. Raises MarkerError for an unmarked one."""
    path = Path(path).resolve()
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip().strip(fence[0])),
                   len(lines))
        lang = info.split()[0].lower() if info else ""
        if lang in SHELL | PYTHON:
            where = f"{_show(path)}:{i + 1}"
            above = i - 1
            while above >= 0 and not lines[above].strip():
                above -= 1
            # the marker is the comment that ends on the line above the fence (it may span lines)
            start = above
            while start >= 0 and "<!--" not in lines[start]:
                start -= 1
            text = "\n".join(lines[start:above + 1]) if above >= 0 and lines[above].rstrip().endswith("-->") else ""
            mm = MARKER.search(text) if text.lstrip().startswith("<!--") else None
            owner, langs = WHOLE_PAGE.get(_show(path), ("", ()))
            if not mm and lang in langs:
                mm = MARKER.search(f"<!-- run by tests: {Path(owner).name} -->")
            if not mm:
                raise MarkerError(f"{where}: a {lang} block without a marker on the line above it; add {ACCEPTED}")
            code = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                             for line in lines[i + 1:end]) + "\n"
            out.append(Block(path, i + 1, lang, code, **_marker(mm.group("body"), where)))
        i = end + 1
    return out


def block(path: Path | str, name: str) -> Block:
    """The block marked ``<!-- run by tests: NAME -->`` in PATH (relative to the repository root, or absolute)."""
    path = ROOT / path if not Path(path).is_absolute() else Path(path)
    found = [b for b in blocks(path) if b.kind == "run by tests" and b.name == name]
    if len(found) != 1:
        raise LookupError(f"{path.relative_to(ROOT)}: {len(found)} blocks marked 'run by tests: {name}' (want one)")
    return found[0]


def pages() -> list[Path]:
    """The docs site's pages and every README of the repository."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    # vendored data keeps its authors' README word for word (tasks/data/*/PROVENANCE.md): it is not gapbench's docs
    readmes = sorted(p for p in ROOT.rglob("README*.md")
                     if not NOT_DOCS & set(p.relative_to(ROOT).parts)
                     and p.relative_to(ROOT).parts[0] != "docs" and p.relative_to(ROOT).parts[:2] != ("tasks", "data"))
    return docs + readmes


def user_env(extra: dict | None = None) -> dict:
    """The environment of an activated shell: the venv's ``gapbench`` and ``python`` first on PATH, offline hub."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    return {**env, **(extra or {})}


def run_block(b: Block, cwd: Path, env: dict | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run one block as written in CWD; a non-zero exit fails with the block's place and the end of its output."""
    if b.lang in SHELL:
        cmd = ["bash", "-euo", "pipefail", "-c", b.code]
    else:
        code = b.code if b.lang != "pycon" else "\n".join(line[4:] for line in b.code.splitlines()
                                                          if line.startswith((">>> ", "... ")))
        cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, cwd=cwd, env=env or user_env(), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"{b.where}: the {b.lang} block exited {out.returncode}:\n{b.code}\n--- stdout\n"
                             f"{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}")
    return out


def run_page(path: Path, workdir: Path) -> list[tuple[Block, subprocess.CompletedProcess]]:
    """Run the ``<!-- run -->`` blocks of one page in order, in WORKDIR, as a user following the page would."""
    todo = [b for b in blocks(path) if b.kind == "run"]
    workdir.mkdir(parents=True, exist_ok=True)
    for b in todo:
        for rel in b.options.get("copy", []):
            src = ROOT / rel
            dst = workdir / src.name
            if not dst.exists():
                shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)
    llm_tasks = {b.options["llm"] for b in todo if "llm" in b.options}
    if not llm_tasks:
        return [(b, _run_page_block(b, workdir)) for b in todo]
    if len(llm_tasks) > 1:
        raise MarkerError(f"{path}: one llm=TASK per page, found {sorted(llm_tasks)}")
    from llm_server import LLMServer  # tests/ is on sys.path under pytest

    import gapbench

    data = gapbench.get_task(llm_tasks.pop()).load()
    with LLMServer(qrels={q: dict(data.qrels[q]) for q in data.qrels},
                   queries={q: data.queries[q].text for q in data.queries},
                   corpus={d: data.corpus[d].text for d in data.corpus}) as server:
        env = user_env({"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "judge"})
        return [(b, _run_page_block(b, workdir, env)) for b in todo]


# ------------------------------------------------------------------------------------ gapbench lines in-process
# a line that changes the shell for the lines after it (a variable, the directory, a function, a loop), or that a
# line-by-line run would cut in the middle: a block with one runs whole in bash
_STATEFUL = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s*$|(?:cd|export|source|\.|set|unset|alias|shopt|trap|pushd|"
                       r"popd|read|declare|local|eval|exec|if|then|else|elif|fi|for|while|until|do|done|case|esac|"
                       r"function|select)(?:\s|$)|[{}()])|(?:^|[\s;&|(])(?:cd|export|source|set|unset|pushd|popd)\s"
                       r"|<<|&\s*$|\(\)")
_SPECIAL = set("|&;<>()*?[]{}~!$`\\")  # outside quotes: the shell would pipe, redirect, glob or expand


def _plain_words(line: str) -> list[str] | None:
    """The words of a line with nothing for the shell to expand, redirect or glob (quotes and a trailing comment
    allowed), or None."""
    quote, word_start = "", True
    for i, ch in enumerate(line):
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch in "$`\\":
                return None
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and word_start:
            line = line[:i]
            break
        elif ch in _SPECIAL:
            return None
        word_start = ch.isspace()
    if quote:
        return None
    import shlex

    return shlex.split(line)


def _lines(code: str) -> list[str]:
    """A bash block's command lines: continuations joined, blank and comment-only lines left out."""
    return [line for line in code.replace("\\\n", " ").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _in_process(argv: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """``gapbench ARGV`` as the environment's script runs it (``gapbench.cli.main``), here, in CWD with ENV."""
    import contextlib
    import io

    from gapbench.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv[1:])
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            out.flush()
            err.flush()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    text = [s.buffer.getvalue().decode("utf-8", "replace") for s in (out, err)]
    return subprocess.CompletedProcess(argv, rc, *text)


def _run_page_block(b: Block, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """``run_block``, but a bash block whose lines are independent runs line by line, its ``gapbench`` lines in this
    process (the module's docstring says when); a failing line fails as ``run_block`` does, naming the block."""
    env = env or user_env()
    lines = _lines(b.code) if b.lang in SHELL else []
    words = [_plain_words(line) for line in lines]
    here = [w is not None and w[:1] == ["gapbench"] for w in words]
    if not any(here) or any(_STATEFUL.search(line) for line, h in zip(lines, here) if not h):
        return run_block(b, cwd, env)
    outs = []
    for line, w, h in zip(lines, words, here):
        out = _in_process(w, cwd, env) if h else subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd,
                                                                env=env, capture_output=True, text=True, timeout=1800)
        outs.append(out)
        if out.returncode != 0:
            raise AssertionError(f"{b.where}: the line {line!r} of the {b.lang} block exited {out.returncode}:\n"
                                 f"{b.code}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}")
    return subprocess.CompletedProcess(b.code, 0, "".join(o.stdout for o in outs), "".join(o.stderr for o in outs))
