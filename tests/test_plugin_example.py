"""The example third-party plugin (examples/gapbench-plugin-example) as a plugin author ships it: installed beside gapbench
(into a folder of its own put on PYTHONPATH, so this test session's registry never sees it), its own tests run with
pytest (they subclass gapbench.testing's contract), and `gapbench run TASK -r char-ngram` finds it through its entry
point and writes the run the plugin itself computes, scored as pytrec_eval scores it."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gapbench-plugin-example"
TASK = "impliret/multispeaker/wknow"



def test_gapbench_testing_gives_the_contracts_and_import_gapbench_leaves_it_out():
    code = ("import sys, gapbench\n"
            "print('gapbench.testing' in sys.modules, 'pytest' in sys.modules)\n"
            "from gapbench.testing import RerankerContract, RetrieverContract, TaskContract\n"
            "print(sorted(n for n in vars(RetrieverContract) if n.startswith('test_')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, tests = out.stdout.splitlines()
    assert first == "False False"
    assert "'test_ties_are_broken_by_doc_id_descending'" in tests and "'test_fingerprint'" in tests


@pytest.fixture(scope="session")
def installed(once_per_session):
    """(source folder, site folder holding the installed plugin, environment that puts it on the path), made once in the
    test session for every xdist worker (tests/fx_models.py); read-only."""

    def make(tmp: Path) -> None:
        src = tmp / "src"  # a copy: building writes build/ and *.egg-info beside the sources
        shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                                    ".pytest_cache"))
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                              "--no-index", "--target", str(tmp / "site"), str(src)], capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr

    tmp = once_per_session("plugin-example", make)
    src, site = tmp / "src", tmp / "site"
    assert (site / "gapbench_char_ngram" / "__init__.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(site), "GAPBENCH_PROGRESS": "off", "HF_HUB_OFFLINE": "1"}
    return src, site, env


def _gapbench(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gapbench", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


@pytest.mark.slow
def test_the_plugins_own_tests_pass_gapbench_testings_contract(installed):
    src, _, env = installed
    # the shared source folder stays as it was made: no bytecode written beside the plugin's tests
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=src,
                         env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    # two contract classes (the entry-point name and the class) and two weight tests, none skipped
    summary = out.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) == 2 * 13 + 2, summary


_SEARCH = """
import json, sys
import pytrec_eval
import gapbench
from gapbench_char_ngram import CharNgram
data = gapbench.get_task(sys.argv[1]).load()
r = CharNgram(n=4)
r.index(data.corpus)
run = r.search(data.queries, 100)
qrels = {q: dict(j) for q, j in data.qrels.items()}
per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run.to_dict())
print(json.dumps({"run": {q: [d for d, _ in run[q]] for q in run}, "fingerprint": r.fingerprint,
                  "ndcg10": sum(v["ndcg_cut_10"] for v in per_query.values()) / len(qrels)}))
"""


@pytest.mark.slow
def test_gapbench_run_finds_the_plugin_through_its_entry_point(installed, wknow_sample_folder, tmp_path):
    """On 300 passages and 100 queries of the task (tests/fx_models.py): the whole task took the plugin 5 s a run."""
    _, _, env = installed
    out = _gapbench(["run", "--help"], {**env, "COLUMNS": "200"}, tmp_path)
    assert "char-ngram" in out.stdout  # the registered retrievers listed include the plugin's
    task = str(wknow_sample_folder)
    out = _gapbench(["run", task, "-r", "char-ngram:n=4", "--k", "100", "-o", str(tmp_path / "run"), "--json"], env,
                    tmp_path)
    assert out.returncode == 0, out.stderr
    reported = json.loads(out.stdout)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["retriever"]["class"] == "gapbench_char_ngram.CharNgram"
    assert manifest["retriever"]["config"] == {"n": 4, "lowercase": True, "use_title": True, "version": "0.1.0"}
    # the plugin's own ranking, computed in another process without gapbench's runner, and pytrec_eval's nDCG@10
    own = subprocess.run([sys.executable, "-c", _SEARCH, task], capture_output=True, text=True, env=env, timeout=600)
    assert own.returncode == 0, own.stderr
    own = json.loads(own.stdout.strip().splitlines()[-1])
    assert manifest["retriever"]["fingerprint"] == own["fingerprint"]
    written: dict[str, list[str]] = {}
    with gzip.open(tmp_path / "run" / "run.trec.gz", "rt") as f:
        for line in f:
            qid, _, doc, rank, _, _ = line.split()
            written.setdefault(qid, []).append(doc)
            assert int(rank) == len(written[qid])
    assert written == own["run"] and len(written) == 100
    assert reported["measures"]["nDCG@10"] == pytest.approx(own["ndcg10"], abs=1e-12)


@pytest.mark.slow
def test_without_the_plugin_installed_the_name_is_unknown(installed, tmp_path):
    _, _, env = installed
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    out = _gapbench(["run", TASK, "-r", "char-ngram"], env, tmp_path)
    assert out.returncode == 2
    assert "unknown retriever 'char-ngram'" in out.stderr and "bm25" in out.stderr, out.stderr


_FLAWED = '''
from gapbench.testing import RetrieverContract
from gapbench.types import Run


class Overlap:
    """Scores a document by the words it shares with the query; ``flaw`` breaks one promise of the contract."""

    name = "overlap"

    def __init__(self, lowercase=True, flaw=""):
        self.lowercase, self.flaw = lowercase, flaw

    @property
    def fingerprint(self):
        return "overlap" if self.flaw == "fingerprint" else f"overlap-{self.lowercase}"

    def _words(self, text):
        return set((text.lower() if self.lowercase else text).split())

    def index(self, corpus):
        self.docs = [(d, self._words(doc.full_text)) for d, doc in corpus.items()]

    def search(self, queries, k, exclude=None):
        out = {}
        for qid, q in queries.items():
            allowed = exclude.allowed(qid) if hasattr(exclude, "allowed") else None
            banned = set() if exclude is None or allowed is not None else set(exclude.get(qid, ()))
            words = self._words(q.text)
            scored = [(d, float(len(words & ws))) for d, ws in self.docs]
            scored.sort(key=lambda p: (-p[1], p[0]) if self.flaw == "ties" else (p[1], p[0]), reverse=self.flaw != "ties")
            keep = lambda d: d not in banned and (allowed is None or d in allowed)
            if self.flaw == "post-filter":
                out[qid] = [p for p in scored[:k] if keep(p[0])]
            else:
                out[qid] = [p for p in scored if keep(p[0])][:k]
        return Run(out, self.name, _sorted=True)


class TestSound(RetrieverContract):
    retriever = Overlap
    changed = lambda: Overlap(lowercase=False)


class TestTies(RetrieverContract):
    retriever = lambda: Overlap(flaw="ties")
    changed = lambda: Overlap(lowercase=False, flaw="ties")


class TestPostFilter(RetrieverContract):
    retriever = lambda: Overlap(flaw="post-filter")
    changed = lambda: Overlap(lowercase=False, flaw="post-filter")


class TestFingerprint(RetrieverContract):
    retriever = lambda: Overlap(flaw="fingerprint")
    changed = lambda: Overlap(lowercase=False, flaw="fingerprint")
'''


def test_the_contract_fails_a_retriever_that_breaks_it(tmp_path):
    """gapbench.testing on a sound word-overlap retriever and on three copies that each break one promise: the sound
    one passes every test, each flawed one fails the tests of its promise (and only those where the flaw shows only
    there)."""
    import xml.etree.ElementTree as ET

    (tmp_path / "test_flawed.py").write_text(_FLAWED)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml",
                          str(tmp_path / "junit.xml"), "test_flawed.py"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "GAPBENCH_PROGRESS": "off"}, timeout=600)
    assert out.returncode == 1, out.stdout[-3000:]
    failed: dict[str, set[str]] = {}
    passed: dict[str, set[str]] = {}
    for case in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase"):
        cls, test = case.get("classname").split(".")[-1], case.get("name").split("[")[0]
        bad = case.find("failure") is not None or case.find("error") is not None
        (failed if bad else passed).setdefault(cls, set()).add(test)
    assert "TestSound" not in failed and len(passed["TestSound"]) == 10  # 13 tests, two parametrized
    assert failed["TestFingerprint"] == {"test_fingerprint"}
    assert failed["TestPostFilter"] == {"test_exclusions_are_masked_before_the_cut",
                                        "test_only_allowed_candidates_are_ranked"}
    assert "test_ties_are_broken_by_doc_id_descending" in failed["TestTies"]
    assert "not broken by doc_id descending" in out.stdout
