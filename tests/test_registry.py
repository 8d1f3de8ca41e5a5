"""Typed registries: a wrong entry is refused at registration (objects) or at first use (lazy strings)."""

from __future__ import annotations

import pytest

from gapbench.errors import ConfigError, GapbenchError
from gapbench.registry import Registry, provides
from gapbench.retrieval import RERANKERS, RETRIEVERS, RUN_AUGMENTERS, Reranker, Retriever
from gapbench.suites import SUITES, Suite
from gapbench.task import TASKS


class NoSearch:
    def index(self, corpus) -> None: ...


class Overlap:
    name = "overlap"

    def index(self, corpus) -> None: ...

    def search(self, queries, k, exclude=None): ...


def test_wrong_object_is_refused_at_registration_and_not_kept():
    with pytest.raises(ConfigError) as err:
        RETRIEVERS.register("no-search", NoSearch)
    assert str(err.value) == (
        "retriever 'no-search': got class NoSearch, expected a retriever (a class or object with index(corpus) and "
        "search(queries, k), or a function making one); register one, or a lazy 'module:attr' string naming one."
    )
    assert not RETRIEVERS.has("no-search")
    with pytest.raises(ConfigError) as err:
        SUITES.register("two-tasks", ("a", "b"))
    assert str(err.value) == (
        "suite 'two-tasks': got tuple ('a', 'b'), expected a Suite(name, tasks, description); register one, or a "
        "lazy 'module:attr' string naming one."
    )
    with pytest.raises(ConfigError, match=r"^task 'pi': got float 3\.14, expected a Task, or a function "):
        TASKS.register("pi", 3.14)
    with pytest.raises(ConfigError, match=r"^reranker 'overlap': got class Overlap, expected a reranker \(a class "):
        RERANKERS.register("overlap", Overlap)


def test_replacing_an_entry_is_checked_too():
    with pytest.raises(ConfigError, match=r"^retriever 'bm25': got int 7, expected a retriever"):
        RETRIEVERS.register("bm25", 7, replace=True)
    assert RETRIEVERS.get("bm25").__name__ == "BM25"


def test_lazy_string_to_a_wrong_object_is_refused_at_first_use():
    SUITES.register("lazy-sqrt", "math:sqrt")  # a string is not imported at registration
    try:
        for _ in range(2):  # the string stays registered: every use fails the same way
            with pytest.raises(ConfigError) as err:
                SUITES.get("lazy-sqrt")
            assert str(err.value) == (
                "suite 'lazy-sqrt': 'math:sqrt' gives function sqrt, expected a Suite(name, tasks, description); "
                "point the 'module:attr' string at one."
            )
    finally:
        SUITES.unregister("lazy-sqrt")
    RETRIEVERS.register("lazy-pi", "math:pi")
    try:
        with pytest.raises(ConfigError, match=r"^retriever 'lazy-pi': 'math:pi' gives float 3\.14159"):
            RETRIEVERS.get("lazy-pi")
    finally:
        RETRIEVERS.unregister("lazy-pi")


def test_every_existing_registration_passes():
    import gapbench.adapters  # noqa: F401  registers the built-in retrievers and rerankers
    import gapbench.tasks  # noqa: F401  registers the built-in tasks and suites

    sizes = {}
    for registry in (TASKS, RETRIEVERS, RERANKERS, SUITES, RUN_AUGMENTERS):
        for name in registry.names():
            registry.get(name)  # resolves lazy strings, so each is checked
        sizes[registry.kind] = len(registry)
    assert sizes["retriever"] >= 12 and sizes["reranker"] >= 2 and sizes["suite"] >= 5 and sizes["augmenter"] == 2
    assert sizes["task"] >= 80
    assert RETRIEVERS.get("bm25").__name__ == "BM25" and RERANKERS.get("tournament").__name__ == "Tournament"


def test_what_a_retriever_entry_may_be():
    check = provides(Retriever, factories=True)

    def make_overlap(**options):
        return Overlap()

    assert check(Overlap) and check(Overlap()) and check(make_overlap)
    assert not check(NoSearch) and not check(NoSearch()) and not check(42)
    objects_only = provides(Retriever)
    assert objects_only(Overlap()) and not objects_only(Overlap) and not objects_only(make_overlap)
    assert not provides(Reranker, factories=True)(Overlap)


def test_has_reads_neither_loaders_nor_entry_points_nor_lazy_strings():
    loaded = []
    reg: Registry = Registry("widget", expects=callable, expected="a callable")
    reg.add_loader(lambda: loaded.append("loader"))
    reg.register("missing-module", "no_such_module_anywhere:thing")
    assert reg.has("missing-module") and not reg.has("other")
    assert loaded == []  # has() ran no loader; `in` does
    assert "other" not in reg and loaded == ["loader"]
    with pytest.raises(ModuleNotFoundError):
        reg.get("missing-module")


def test_a_check_function_with_its_words():
    reg: Registry = Registry("widget", expects=callable, expected="a callable")
    reg.register("len", len)
    with pytest.raises(GapbenchError) as err:
        reg.register("text", b"abc")
    assert str(err.value) == (
        "widget 'text': got bytes b'abc', expected a callable; register one, or a lazy 'module:attr' string naming one."
    )
    untyped: Registry = Registry("thing")
    untyped.register("anything", 42)  # a registry told nothing accepts everything, as before
    assert untyped.get("anything") == 42
    by_class: Registry = Registry("collection", expects=Suite)  # a base class: its instances pass, named for it
    by_class.register("one", Suite("one", ("a",)))
    with pytest.raises(ConfigError, match=r"^collection 'cls': got class Suite, expected a Suite; register one"):
        by_class.register("cls", Suite)
