"""Adapters' settings on the verbs' contract (issue 25 part 1): every retriever and reranker declares its settings as
one pydantic model built on gapbench.contract.Options, a spec's ``key=value`` text and a Python call are checked by
that model, and a bad setting of a retriever, an analysis or a verb raises the same OptionsError in the same words."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest

import gapbench
from gapbench.contract import Options
from gapbench.errors import ConfigError, OptionsError
from gapbench.retrieval import RERANKERS, RETRIEVERS, get_reranker, get_retriever
from gapbench.settings import Settings, accepts, markdown, read_text, settings_model

ROOT = Path(__file__).resolve().parents[1]
LLM = {"llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "m"}  # checked when made; never called here


def _registered(registry) -> dict[str, type]:
    """Each built-in entry's class, imported (a test's own registrations, from other modules, left out)."""
    import gapbench.adapters  # noqa: F401  (registers the built-ins)

    entries = {name: registry.get(name) for name in registry.names()}
    return {name: cls for name, cls in entries.items()
            if getattr(cls, "__module__", "").startswith("gapbench.adapters")}


def _every_options_class() -> list[type]:
    import gapbench.analyses.argus.argus_options  # noqa: F401  (each module defines its options class)
    import gapbench.analyses.argus.remedy.remedy_compare  # noqa: F401
    import gapbench.analyses.coverage.coverage_options  # noqa: F401
    import gapbench.analyses.gap  # noqa: F401
    import gapbench.analyses.obliq_build.obliq_options  # noqa: F401
    import gapbench.analyses.signals.signals_options  # noqa: F401
    import gapbench.evaluation.evaluate_options  # noqa: F401
    import gapbench.products.leaderboard  # noqa: F401
    import gapbench.products.regress  # noqa: F401
    import gapbench.runner  # noqa: F401

    _registered(RETRIEVERS), _registered(RERANKERS)  # imports every adapter module, so its settings model exists
    found, todo = [], [Options]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            # a model made from a function's signature (a task's options) is named <qualname>_settings
            if sub is not Settings and not sub.__name__.endswith("_settings"):
                found.append(sub)
    return sorted(set(found), key=lambda c: c.__name__)


CLASSES = _every_options_class()


def _problems(cls: type, **given) -> dict[str, str]:
    with pytest.raises(OptionsError) as caught:
        cls(**given)
    return dict(caught.value.problems)


def test_the_classes_found_are_the_verbs_the_analyses_and_the_adapters():
    names = {c.__name__ for c in CLASSES}
    assert {"RunOptions", "EvaluateOptions", "GapOptions", "ArgusAuditOptions", "RegressOptions",
            "BM25Settings", "BM25LuceneSettings", "BM25QSSettings", "BM25OkapiSettings", "DenseSettings",
            "ColBERTSettings", "OpenAIEmbedSettings", "TournamentSettings", "SlidingWindowSettings"} <= names


def test_every_builtin_retriever_and_reranker_declares_one_settings_model():
    for registry in (RETRIEVERS, RERANKERS):
        for name, cls in _registered(registry).items():
            declared = getattr(cls, "settings", None)
            assert isinstance(declared, type) and issubclass(declared, Settings), name
            assert settings_model(cls) is declared
            assert all(field.description for field in declared.model_fields.values()), name


@pytest.mark.parametrize("cls", [c for c in CLASSES if "seed" in c.model_fields], ids=lambda c: c.__name__)
def test_every_options_class_with_a_seed_refuses_seed_minus_1_naming_it(cls):
    assert _problems(cls, seed=-1)["seed"] == "must be greater than or equal to 0, got -1"


@pytest.mark.parametrize("cls", [c for c in CLASSES if "alpha" in c.model_fields], ids=lambda c: c.__name__)
def test_every_options_class_with_an_alpha_refuses_alpha_1(cls):
    assert _problems(cls, alpha=1.0)["alpha"] == "must be strictly between 0 and 1 (e.g. 0.05), got 1.0"


DEPTHS = [(c, f) for c in CLASSES for f in ("depth", "k") if f in c.model_fields
          and c.model_fields[f].annotation is int]


@pytest.mark.parametrize("cls, field", DEPTHS, ids=lambda x: getattr(x, "__name__", x))
def test_every_depth_refuses_0_naming_the_field(cls, field):
    assert _problems(cls, **{field: 0})[field] == "must be greater than or equal to 1, got 0"


@pytest.mark.parametrize("cls", [c for c in CLASSES if "batch_size" in c.model_fields], ids=lambda c: c.__name__)
def test_every_batch_size_refuses_0_naming_it(cls):
    assert re.fullmatch(r"must be (greater than or equal to [12]|1 or more), got 0", _problems(cls, batch_size=0)
                        ["batch_size"])


def test_the_shared_types_carry_the_shared_check():
    """An adapter's seed, depth and batch size are the contract's types, not a bound written again."""
    from pydantic import AfterValidator

    from gapbench import contract
    from gapbench.adapters.colbert import ColBERTSettings
    from gapbench.adapters.dense import DenseSettings
    from gapbench.adapters.tournament import TournamentSettings

    for cls, name, typ in ((ColBERTSettings, "seed", contract.Seed), (TournamentSettings, "seed", contract.Seed),
                           (TournamentSettings, "depth", contract.Depth), (DenseSettings, "batch_size",
                                                                           contract.BatchSize)):
        check = next(m for m in typ.__metadata__ if isinstance(m, AfterValidator))
        assert any(m is check for m in cls.model_fields[name].metadata), (cls.__name__, name)


# ---------------------------------------------------------------- one system: a spec, a Python call, a verb


@pytest.mark.parametrize("spec, python, field, message", [
    ("bm25:k1=-1", ("bm25", {"k1": -1}), "k1", "must be greater than or equal to 0, got "),
    ("bm25-okapi:b=2", ("bm25-okapi", {"b": 2}), "b", "must be less than or equal to 1, got "),
    ("dense:batch_size=0", ("dense", {"batch_size": 0}), "batch_size", "must be greater than or equal to 1, got "),
    ("colbert:seed=-1", ("colbert", {"seed": -1}), "seed", "must be greater than or equal to 0, got "),
    ("openai-embed:concurrency=0", ("openai-embed", {"concurrency": 0}), "concurrency",
     "must be greater than or equal to 1, got "),
])
def test_a_spec_and_a_python_call_are_refused_the_same_way(spec, python, field, message):
    with pytest.raises(OptionsError) as from_spec:
        get_retriever(spec)
    name, values = python
    with pytest.raises(OptionsError) as from_python:
        RETRIEVERS.get(name)(**values)
    value = spec.rpartition("=")[2]
    # the spec's text is shown as typed ('-1'), the Python value as given (-1)
    assert str(from_spec.value) == f"retriever {name}: {field} {message}{value!r}."
    assert str(from_python.value) == f"retriever {name}: {field} {message}{values[field]!r}."
    assert from_spec.value.owner == from_python.value.owner == f"retriever {name}"
    assert dict(from_spec.value.problems).keys() == {field}


def test_a_reranker_seed_is_refused_as_a_verbs_seed_is():
    from gapbench.runner import RunOptions

    with pytest.raises(OptionsError) as reranker:
        get_reranker("tournament:seed=-1", **LLM)
    with pytest.raises(OptionsError) as verb:
        RunOptions(seed=-1)
    assert str(reranker.value) == "reranker tournament: seed must be greater than or equal to 0, got '-1'."
    assert str(verb.value) == "RunOptions: seed must be greater than or equal to 0, got -1."


def test_gapbench_run_refuses_k_0_naming_k():
    with pytest.raises(OptionsError) as caught:
        gapbench.run("impliret/multispeaker/wknow", "bm25", k=0)
    assert dict(caught.value.problems) == {"k": "must be greater than or equal to 1, got 0"}


def test_an_unknown_setting_is_named_with_the_closest_and_every_accepted_one():
    with pytest.raises(OptionsError) as caught:
        get_retriever("bm25-okapi:epsilom=0.1")
    assert str(caught.value) == ("retriever bm25-okapi: epsilom is not a setting (did you mean 'epsilon'?); accepted "
                                 "settings: k1, b, epsilon, tokenizer, lowercase, use_title, keep_zero.")
    with pytest.raises(OptionsError, match=r"^reranker sliding-window: zzz is not a setting; accepted settings: "):
        get_reranker("sliding-window:zzz=1", **LLM)


def test_settings_across_fields_are_checked_by_the_model():
    with pytest.raises(OptionsError) as caught:
        get_reranker("tournament:batch_size=4,promote=4", **LLM)
    assert str(caught.value) == ("reranker tournament: promote must be less than batch_size (4 >= 4), or rounds never "
                                 "shrink.")
    with pytest.raises(OptionsError, match=r"^reranker sliding-window: stride must be at most window \(30 > 20\)\.$"):
        get_reranker("sliding-window:stride=30", **LLM)


def test_accepted_values_keep_their_types_and_defaults():
    r = get_retriever("dense:batch_size=8,max_length=none,device=cuda:1,normalize=no,revision=")
    assert (r.batch_size, r.max_length, r.device, r.normalize, r.revision) == (8, None, "cuda:1", False, None)
    t = get_reranker("tournament:seeds=0,4,7,temperature=1,max_chars=0", **LLM)
    assert (t.seeds, t.tconfig.seed, t.temperature, t.max_chars) == ((0, 4, 7), 0, 1.0, None)


# ---------------------------------------------------------------- reading a spec's text


@pytest.mark.parametrize("annotation, text, value", [
    (int, "64", 64), (int, " -3 ", -3), (float, "0.5", 0.5), (float, "1e3", 1000.0), (float, ".5", 0.5),
    (bool, "Yes", True), (bool, "off", False), (bool, "1", True), (int | None, "none", None),
    (int | None, "", None), (str | None, "NULL", None), (str, "", ""), (str, " a, b ", " a, b "),
    (Literal["x", "y"], "z", "z"),  # a choice is read as text; the model refuses it with the choices
])
def test_read_text_reads_by_the_fields_type(annotation, text, value):
    got = read_text(annotation, text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("annotation, text", [
    (int, "3_0"), (int, "1e3"), (int, "0x10"), (int, "1.0"), (float, "nan"), (float, "inf"), (float, "1e999"),
    (float, "1_0"), (bool, "maybe"), (bool, "2"), (int, "none"),
])
def test_read_text_refuses_what_python_would_quietly_read(annotation, text):
    with pytest.raises(ValueError):
        read_text(annotation, text)


def test_what_a_setting_accepts_is_worded_from_its_field():
    from gapbench.adapters.bm25 import BM25Settings
    from gapbench.adapters.dense import DenseSettings
    from gapbench.adapters.tournament import TournamentSettings

    assert accepts(BM25Settings, "k1") == "a finite number >= 0"
    assert accepts(BM25Settings, "b") == "a finite number from 0 to 1"
    assert accepts(BM25Settings, "method") == "one of lucene, robertson, atire, bm25l, bm25+"
    assert accepts(BM25Settings, "use_title") == "true or false"
    assert accepts(DenseSettings, "batch_size") == "a whole number from 1 to 1,000,000"
    assert accepts(DenseSettings, "max_length") == "a whole number >= 1, or none"
    assert accepts(DenseSettings, "device") == "cpu, cuda, cuda:N, mps or xpu"
    assert accepts(TournamentSettings, "seed") == "a whole number >= 0"
    assert accepts(TournamentSettings, "depth") == "a whole number from 1 to 100,000"


def test_a_task_factory_is_checked_from_its_signature():
    def task(split: str = "test", limit: int | None = None, fast: bool = False):
        return (split, limit, fast)

    from gapbench.settings import build

    assert build(task, {"limit": "5", "fast": "yes"}, "task 'toy'") == ("test", 5, True)
    with pytest.raises(OptionsError) as caught:
        build(task, {"limit": "five"}, "task 'toy'")
    assert str(caught.value) == "task 'toy': limit must be a whole number, or none, got 'five'."
    with pytest.raises(ConfigError, match=r"^task 'toy': splt is not a setting \(did you mean 'split'\?\)"):
        build(task, {"splt": "dev"}, "task 'toy'")


# ---------------------------------------------------------------- the docs list the models' fields


def _documented(page: str) -> dict[str, str]:
    """``### `name` settings`` headings of a docs page and the table under each."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^### `([^`]+)` settings\n\n((?:\|.*\n)+)", text,
                                                                   re.MULTILINE)}


@pytest.mark.parametrize("page, registry", [("retrievers.md", RETRIEVERS), ("rerankers.md", RERANKERS)])
def test_the_docs_list_each_adapters_settings_from_its_model(page, registry):
    documented = _documented(page)
    models = {name: cls.settings for name, cls in _registered(registry).items()}
    assert documented.keys() == models.keys()
    for name, model in models.items():
        assert documented[name] == markdown(model), f"docs/{page}: regenerate {name}'s table with " \
                                                    f"gapbench.settings.markdown({model.__name__})"
