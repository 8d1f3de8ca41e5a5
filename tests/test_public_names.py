"""The public API (issue 25 part 4): at most 30 names, every verb taking its options object from those names, and the
same call refused or accepted whether its settings come as an options object or as keywords."""

from __future__ import annotations

import inspect
import re
import typing

import pytest

import gapbench
from gapbench.contract import Options
from gapbench.errors import ConfigError, OptionsError
from gapbench.types import Qrels, Run

RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d1": 1.0, "d3": 0.5}}
QRELS = {"q1": {"d2": 1}, "q2": {"d1": 1}}


def _verbs() -> dict[str, typing.Callable[..., typing.Any]]:
    return {n: getattr(gapbench, n) for n in gapbench.__all__ if n[0].islower() and n != "get_task"}


def test_at_most_30_names_and_every_one_resolves():
    assert len(gapbench.__all__) <= 30
    assert all(getattr(gapbench, n) is not None for n in gapbench.__all__)
    assert dir(gapbench) == gapbench.__all__


def test_every_verb_takes_its_options_object_from_the_public_names():
    verbs = _verbs()
    assert sorted(verbs) == ["argus_audit", "argus_compare", "argus_probe", "build_obliq", "compare", "coverage",
                             "evaluate", "gap", "regress", "report", "run", "run_suite", "signals"]
    for name, verb in verbs.items():
        annotation = inspect.signature(verb).parameters["options"].annotation  # a string: postponed annotations
        named = [w for w in re.findall(r"\w+", str(annotation)) if w != "None"]
        assert len(named) == 1 and named[0] in gapbench.__all__, (name, annotation)
        assert issubclass(getattr(gapbench, named[0]), Options), name


def test_evaluate_takes_its_options_or_keywords_and_refuses_either_way():
    by_keywords = gapbench.evaluate(RUN, QRELS, ["RR@10"], seed=3, n_resamples=200)
    by_options = gapbench.evaluate(RUN, QRELS, ["RR@10"], gapbench.EvaluateOptions(seed=3, n_resamples=200))
    # q1: d2 at rank 2 -> 1/2; q2: d1 at rank 1 -> 1
    assert by_keywords.means["RR@10"] == by_options.means["RR@10"] == 0.75
    assert by_keywords.ci95 == by_options.ci95
    with pytest.raises(OptionsError, match=r"EvaluateOptions: seed must be greater than or equal to 0, got -1"):
        gapbench.evaluate(RUN, QRELS, ["RR@10"], seed=-1)
    with pytest.raises(OptionsError, match="n_resamples"):
        gapbench.evaluate(RUN, QRELS, ["RR@10"], gapbench.EvaluateOptions(), n_resamples=-5)
    with pytest.raises(ConfigError, match="options must be a EvaluateOptions, got CompareOptions"):
        gapbench.evaluate(RUN, QRELS, ["RR@10"], gapbench.CompareOptions())


def test_compare_takes_its_options_or_keywords():
    other = {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d3": 1.0, "d1": 0.5}}
    runs = [Run.from_dict(RUN, name="a"), Run.from_dict(other, name="b")]
    qrels = Qrels.from_dict(QRELS)
    a = gapbench.compare(runs, qrels, ["RR@10"], alpha=0.1, n_permutations=500, seed=1)
    b = gapbench.compare(runs, qrels, ["RR@10"], gapbench.CompareOptions(alpha=0.1, n_permutations=500, seed=1))
    assert a.model_dump(mode="json") == b.model_dump(mode="json")
    assert a.alpha == 0.1
    with pytest.raises(OptionsError, match="alpha"):
        gapbench.compare(runs, qrels, ["RR@10"], alpha=1.0)
