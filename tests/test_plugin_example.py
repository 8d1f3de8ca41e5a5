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


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site folder holding the installed plugin, environment that puts it on the path)."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"  # a copy: building writes build/ and *.egg-info beside the sources
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache"))
    site = tmp / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(src)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert (site / "gapbench_char_ngram" / "__init__.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(site), "GAPBENCH_PROGRESS": "off", "HF_HUB_OFFLINE": "1"}
    return src, site, env


def _gapbench(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gapbench", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


@pytest.mark.slow
def test_the_plugins_own_tests_pass_gapbench_testings_contract(installed):
    src, _, env = installed
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=src, env=env,
                         capture_output=True, text=True, timeout=900)
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
def test_gapbench_run_finds_the_plugin_through_its_entry_point(installed, tmp_path):
    _, _, env = installed
    out = _gapbench(["run", "--help"], {**env, "COLUMNS": "200"}, tmp_path)
    assert "char-ngram" in out.stdout  # the registered retrievers listed include the plugin's
    out = _gapbench(["run", TASK, "-r", "char-ngram:n=4", "--k", "100", "-o", str(tmp_path / "run"), "--json"], env,
                    tmp_path)
    assert out.returncode == 0, out.stderr
    reported = json.loads(out.stdout)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["retriever"]["class"] == "gapbench_char_ngram.CharNgram"
    assert manifest["retriever"]["config"] == {"n": 4, "lowercase": True, "use_title": True, "version": "0.1.0"}
    # the plugin's own ranking, computed in another process without gapbench's runner, and pytrec_eval's nDCG@10
    own = subprocess.run([sys.executable, "-c", _SEARCH, TASK], capture_output=True, text=True, env=env, timeout=600)
    assert own.returncode == 0, own.stderr
    own = json.loads(own.stdout.strip().splitlines()[-1])
    assert manifest["retriever"]["fingerprint"] == own["fingerprint"]
    written: dict[str, list[str]] = {}
    with gzip.open(tmp_path / "run" / "run.trec.gz", "rt") as f:
        for line in f:
            qid, _, doc, rank, _, _ = line.split()
            written.setdefault(qid, []).append(doc)
            assert int(rank) == len(written[qid])
    assert written == own["run"] and len(written) == 1500
    assert reported["measures"]["nDCG@10"] == pytest.approx(own["ndcg10"], abs=1e-12)


@pytest.mark.slow
def test_without_the_plugin_installed_the_name_is_unknown(installed, tmp_path):
    _, _, env = installed
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    out = _gapbench(["run", TASK, "-r", "char-ngram"], env, tmp_path)
    assert out.returncode == 2
    assert "unknown retriever 'char-ngram'" in out.stderr and "bm25" in out.stderr, out.stderr
