"""The core verbs on the one contract (issue 25): the settings that recur across verbs (seed, alpha, resamples,
permutations, depth) are typed once in gapbench.contract and every options class refuses a bad one in the same words;
gapbench.run's settings are a RunOptions, so ``k=0`` is refused from Python as from the command line; a measure that
reads deeper than the run's k is named where the numbers are printed and in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gapbench
from gapbench.analyses.gap import GapOptions
from gapbench.cli import main
from gapbench.contract import MAX_PERMUTATIONS, MAX_RESAMPLES, Options
from gapbench.errors import OptionsError
from gapbench.evaluation.evaluation import depth_notes
from gapbench.runner import RunOptions
from gapbench.schemas import RunManifest

TASK = "impliret/multispeaker/wknow"


def _every_options_class() -> list[type]:
    import gapbench.analyses.argus.remedy.remedy_compare  # noqa: F401  (each module defines its options class)
    import gapbench.analyses.argus.argus_options  # noqa: F401
    import gapbench.analyses.coverage.coverage_options  # noqa: F401
    import gapbench.analyses.gap  # noqa: F401
    import gapbench.analyses.obliq_build.obliq_options  # noqa: F401
    import gapbench.analyses.signals.signals_options  # noqa: F401
    import gapbench.evaluation.comparison  # noqa: F401
    import gapbench.products.leaderboard  # noqa: F401
    import gapbench.products.regress  # noqa: F401

    found, todo = [], [Options]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return sorted(set(found), key=lambda c: c.__name__)


CLASSES = _every_options_class()


def _problems(cls: type, **given) -> dict[str, str]:
    with pytest.raises(OptionsError) as caught:
        cls(**given)
    return dict(caught.value.problems)


def test_every_verb_has_its_options_class():
    names = {c.__name__ for c in CLASSES}
    assert {"RunOptions", "GapOptions", "SignalsOptions", "CoverageOptions", "ArgusAuditOptions", "ArgusProbeOptions",
            "ArgusSweepOptions", "ArgusCompareOptions", "RegressOptions", "LeaderboardOptions",
            "ObliqBuildOptions", "CompareOptions"} <= names


@pytest.mark.parametrize("cls", [c for c in CLASSES if "seed" in c.model_fields], ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed, message", [
    (-1, "must be greater than or equal to 0, got -1"),
    (True, "must be a valid integer, got True"),
    (2**63, "must be at most 9,223,372,036,854,775,807, got a 19-digit number"),
])
def test_every_options_class_refuses_a_bad_seed_in_the_same_words(cls, seed, message):
    assert _problems(cls, seed=seed)["seed"] == message


def test_every_seed_alpha_and_permutations_field_is_the_shared_type():
    """No options class checks one of these settings its own way: the field carries the shared type's validator."""
    from pydantic import AfterValidator

    from gapbench import contract

    shared = {"seed": contract.Seed, "alpha": contract.Alpha, "n_permutations": contract.Permutations}
    for cls in CLASSES:
        for name, typ in shared.items():
            if name in cls.model_fields:
                check = next(m for m in typ.__metadata__ if isinstance(m, AfterValidator))
                assert any(m is check for m in cls.model_fields[name].metadata), (cls.__name__, name)


@pytest.mark.parametrize("cls", [c for c in CLASSES if "alpha" in c.model_fields], ids=lambda c: c.__name__)
@pytest.mark.parametrize("alpha, message", [
    (1, "must be strictly between 0 and 1 (e.g. 0.05), got 1.0"),
    (0.0, "must be strictly between 0 and 1 (e.g. 0.05), got 0.0"),
    (float("nan"), "must be a finite number, got nan"),
    ("0.05", "must be a valid number, got '0.05'"),
])
def test_every_alpha_is_a_level_strictly_between_0_and_1(cls, alpha, message):
    assert _problems(cls, alpha=alpha)["alpha"] == message


def test_resamples_and_permutations_are_bounded_as_the_statistics_are():
    from gapbench.evaluation import stats

    assert (MAX_RESAMPLES, MAX_PERMUTATIONS) == (stats.MAX_RESAMPLES, stats.MAX_PERMUTATIONS)
    from gapbench.products.leaderboard import LeaderboardOptions
    from gapbench.products.regress import RegressOptions

    assert _problems(LeaderboardOptions, n_resamples=0)["n_resamples"] == "must be greater than or equal to 1, got 0"
    assert _problems(LeaderboardOptions, n_resamples=MAX_RESAMPLES + 1)["n_resamples"] == \
        "must be at most 1,000,000, got 1,000,001"
    for cls in (LeaderboardOptions, RegressOptions):
        assert _problems(cls, n_permutations=MAX_PERMUTATIONS + 1)["n_permutations"] == \
            "must be at most 10,000,000, got 10,000,001"


# ---------------------------------------------------------------- RunOptions

@pytest.mark.parametrize("given, message", [
    (dict(k=0), "RunOptions: k must be greater than or equal to 1, got 0."),
    (dict(k=100_001), "RunOptions: k must be at most 100,000, got 100,001."),
    (dict(k=1.5), "RunOptions: k must be a valid integer, got 1.5."),
    (dict(seed=-1), "RunOptions: seed must be greater than or equal to 0, got -1."),
    (dict(reranker=" "), "RunOptions: reranker is empty; give a value, or leave the option out."),
    (dict(llm_model=""), "RunOptions: llm_model is empty; give a value, or leave the option out."),
    (dict(output=""), "RunOptions: output is empty; give a value, or leave the option out."),
    (dict(memory_budget="4XB"), "RunOptions: memory_budget '4XB' is not a size; give bytes or a number with KB, MB, "
                                "GB, KiB, MiB or GiB (e.g. 4GB)."),
    (dict(memory_budget=1000), "RunOptions: memory_budget is 1,000 bytes, below the smallest budget gapbench works "
                               "in (64 MiB); give more, got 1000."),
    (dict(measures=[]), "RunOptions: measures is empty; give measures such as ['nDCG@10', 'R@100'], or leave it "
                        "out for the task's own."),
    (dict(measures=["nDCG@10", "nDCG@10"]), "RunOptions: measures must be measures gapbench reads; a measure is listed "
                                            "twice in nDCG@10, nDCG@10, got ['nDCG@10', 'nDCG@10']."),
    (dict(depth=3), "RunOptions: depth is not a setting of gapbench.run; accepted settings: measures, k, output, "
                    "overwrite, seed, reranker, llm_base_url, llm_model, augment, memory_budget, ray."),
])
def test_run_options_name_the_setting(given, message):
    with pytest.raises(OptionsError) as caught:
        RunOptions(**given)
    assert str(caught.value) == message


def test_run_options_read_sizes_ray_addresses_and_measure_lists():
    o = RunOptions(memory_budget="1GiB", measures="nDCG@10, map", ray="local", output="out")
    assert (o.memory_budget, o.measures, o.ray, o.output) == (2**30, ("nDCG@10", "map"), "local", Path("out"))
    with pytest.raises(OptionsError) as caught:
        RunOptions(ray="head-node")
    assert str(caught.value).startswith("RunOptions: ray 'head-node' is not a Ray address; give `local`")


def test_gapbench_run_refuses_k_0_from_python_before_any_work():
    with pytest.raises(OptionsError) as caught:
        gapbench.run(TASK, "bm25", k=0)
    assert caught.value.problems == [("k", "must be greater than or equal to 1, got 0")]
    with pytest.raises(OptionsError, match=r"^RunOptions: seed must be greater than or equal to 0, got -1\.$"):
        gapbench.run(TASK, "bm25", RunOptions(k=5), seed=-1)
    # run is a verb, not an analysis: the error names it (an analysis' options keep "this analysis")
    with pytest.raises(OptionsError, match=r"^RunOptions: kk is not a setting of gapbench\.run \(did you mean 'k'\?\); "
                                           r"accepted settings: measures, k, "):
        gapbench.run(TASK, "bm25", kk=10)
    with pytest.raises(OptionsError,
                       match=r"^GapOptions: no_such is not a setting of this analysis; accepted settings: "):
        GapOptions(no_such=1)


def test_the_command_line_refuses_k_0_in_its_flags_words(capsys):
    assert main(["run", TASK, "-r", "bm25", "--k", "0"]) == 2
    assert capsys.readouterr().err == "gapbench: error: --k must be greater than or equal to 1, got 0.\n"
    assert main(["run", TASK, "-r", "bm25", "--memory-budget", "lots"]) == 2
    assert capsys.readouterr().err.startswith("gapbench: error: --memory-budget 'lots' is not a size; give bytes")


def test_a_suite_run_takes_no_reranker_from_python():
    from gapbench.runner import run_suite

    with pytest.raises(OptionsError) as caught:
        run_suite("impliret", "bm25", reranker="tournament")
    assert str(caught.value) == ("RunOptions: reranker is not taken by a suite run; run the suite's tasks one by one "
                                 "with it.")


# ---------------------------------------------------------------- measures deeper than k

def test_depth_notes_name_each_measure_deeper_than_k():
    assert depth_notes(["nDCG@10", "R@100", "P@5", "AP", "NumRel", "nDCG(judged_only=true)@3"], 5) == [
        "nDCG@10 looks at 10 results but the run kept k=5: rerun with k=10 or drop nDCG@10",
        "R@100 looks at 100 results but the run kept k=5: rerun with k=100 or drop R@100",
        "AP looks at the whole ranking (1000 results by trec_eval's convention) but the run kept k=5: rerun with "
        "k=1000 or drop AP",
        "nDCG(judged_only=True)@3 looks at the whole ranking (1000 results by trec_eval's convention) but the run "
        "kept k=5: rerun with k=1000 or drop nDCG(judged_only=True)@3",
    ]
    assert depth_notes(["nDCG@10", "R@1000", "map", "Rprec"], 1000) == []


def test_a_run_shallower_than_its_measures_says_so_in_print_and_in_the_manifest(tmp_path, capsys):
    note = "R@100 looks at 100 results but the run kept k=5: rerun with {}100 or drop R@100"
    result = gapbench.run(TASK, "bm25", k=5, measures=["nDCG@5", "R@100"], output=tmp_path / "py")
    assert result.manifest.notes == [note.format("k=")] == list(result.notes)
    assert str(result).endswith("\nnote: " + note.format("k=") + ".")
    from gapbench.store import load_manifest, load_results

    assert load_manifest(tmp_path / "py")["notes"] == [note.format("k=")]
    assert load_results(tmp_path / "py").notes == [note.format("k=")]

    assert main(["run", TASK, "-r", "bm25", "--k", "5", "-m", "nDCG@5,R@100"]) == 0
    out = capsys.readouterr().out
    assert "\nnote: " + note.format("--k ") + ".\n" in out
    assert main(["run", TASK, "-r", "bm25", "--k", "5", "-m", "nDCG@5,R@100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [note.format("--k ")]
    assert main(["run", TASK, "-r", "bm25", "--k", "100", "-m", "nDCG@5,R@100", "--json"]) == 0
    assert "notes" not in json.loads(capsys.readouterr().out)


def test_a_manifest_written_before_notes_still_loads():
    doc = {"manifest_version": 1, "task": {"name": "t", "source": "s", "revision": "r", "split": "test",
                                           "license": "l", "citation": "c", "main_measure": "nDCG@10",
                                           "n_docs": 1, "n_queries": 1},
           "system": "bm25", "retriever": {"name": "bm25", "class": "x.BM25", "config": {}, "fingerprint": "f"},
           "fingerprints": {"corpus": "a", "queries": "b", "qrels": "c"}, "k": 10, "measures": ["nDCG@10"],
           "seed": 0, "date": "2026-01-01T00:00:00Z", "versions": {}, "timings": {}}
    assert RunManifest.model_validate(doc).notes == []


def test_an_output_that_cannot_be_a_run_directory_is_refused_from_python_before_any_work(tmp_path):
    from gapbench.errors import ConfigError

    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError) as caught:
        gapbench.run("no-such-task-is-loaded-first", "bm25", output=tmp_path / "file")
    assert str(caught.value) == (f"{tmp_path / 'file'} is an existing file, and a run directory is a folder; give a "
                                 "new folder name, or move the file away.")


def test_a_suite_names_its_tasks_notes_once():
    from gapbench.evaluation.evaluation import evaluate
    from gapbench.schemas.run import SuiteResults
    from gapbench.types import Run

    def result(task):
        run = Run({"q1": [("d1", 1.0)]}, name="bm25")
        return evaluate(run, {"q1": {"d1": 1}}, ["R@100"], task=task, depth=10)

    suite = SuiteResults.of("impliret", [result("a"), result("b")])
    note = "R@100 looks at 100 results but the run kept k=10: rerun with k=100 or drop R@100"
    assert suite.notes == [note] and suite.model_dump(mode="json", exclude_unset=True)["notes"] == [note]
    assert suite.tasks == {"a": {"R@100": 1.0}, "b": {"R@100": 1.0}} and suite.full_benchmark_avg == {"R@100": 1.0}
    assert str(suite).endswith("\nnote: " + note + ".") and str(suite).count("note:") == 1
