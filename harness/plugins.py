"""Analyses as plugins: every analysis, gapbench's own (gap, signals, coverage, ARGUS, OBLIQ build) and any outside
package's, registers through the entry-point group ``gapbench.analyses``, so the core never imports one.

An entry point names an :class:`Analysis`: its verbs (each a function, its options model and its report model) and
the functions that add its commands to the command line, all as lazy ``"module:attr"`` strings (or the objects
themselves), so listing the analyses, as ``gapbench --help`` does, imports none of them::

    # an outside package's pyproject.toml
    [project.entry-points."gapbench.analyses"]
    novelty = "gapbench_novelty.plugin:ANALYSIS"

    # gapbench_novelty/plugin.py: imports nothing heavy
    from gapbench.plugins import Analysis, Verb

    ANALYSIS = Analysis(
        "novelty", "How novel each retrieved document is.",
        verbs=(Verb("novelty", "gapbench_novelty.verb:novelty", options="gapbench_novelty.verb:NoveltyOptions",
                    report="gapbench_novelty.verb:NoveltyReport"),),
        cli=("gapbench_novelty.cli:register",))   # register(app) adds `gapbench novelty` to the typer app

:func:`analyses` reads the group once; :func:`get_analysis` finds one by name. ``gapbench.testing.AnalysisContract``
checks that a plugin registers and that each verb returns its report model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import DuplicateNameError, GapbenchError, UnknownNameError
from .registry import resolve_lazy

GROUP = "gapbench.analyses"

Target = str | Callable[..., Any] | type


class PluginError(GapbenchError):
    """An entry point of ``gapbench.analyses`` that cannot be used: it names the entry point and its distribution."""


def _resolve(target: Target, what: str) -> Any:
    if not isinstance(target, str):
        return target
    try:
        return resolve_lazy(target)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"{what} {target!r} cannot be imported ({type(exc).__name__}: {exc}); install the package "
                          "that provides it, or fix the 'module:attr' string.") from None


@dataclass(frozen=True)
class Verb:
    """One verb of an analysis: ``function(inputs..., options) -> report``, with ``options`` the options model it
    takes (a :class:`gapbench.contract.Options`) and ``report`` the pydantic model it returns (the file's model)."""

    name: str
    function: Target
    options: Target
    report: Target

    def load(self) -> tuple[Callable[..., Any], type, type]:
        """(function, options model, report model), imported."""
        where = f"verb {self.name!r}:"
        function = _resolve(self.function, f"{where} the function")
        options, report = _resolve(self.options, f"{where} the options"), _resolve(self.report, f"{where} the report")
        if not callable(function):
            raise PluginError(f"{where} {self.function!r} is not callable; point it at the verb's function.")
        for role, cls in (("options", options), ("report", report)):
            if not (inspect.isclass(cls) and hasattr(cls, "model_validate")):
                raise PluginError(f"{where} the {role} {getattr(self, role)!r} is not a pydantic model class; point "
                                  f"it at the verb's {role} model.")
        return function, options, report


@dataclass(frozen=True)
class Analysis:
    """What an entry point of ``gapbench.analyses`` names: the analysis' ``name`` (the entry point's name too), a
    one-line ``summary``, its ``verbs``, ``cli``, the functions ``register(app)`` that add its commands to the
    ``gapbench`` typer app, and ``augmenters``, (name, function) pairs that ``gapbench run --augment NAME`` finds in
    :data:`gapbench.retrieval.RUN_AUGMENTERS`."""

    name: str
    summary: str
    verbs: tuple[Verb, ...] = ()
    cli: tuple[Target, ...] = ()
    augmenters: tuple[tuple[str, Target], ...] = ()

    def verb(self, name: str) -> Verb:
        for v in self.verbs:
            if v.name == name:
                return v
        raise UnknownNameError(f"verb of analysis {self.name!r}", name, [v.name for v in self.verbs])

    def add_commands(self, app: Any) -> None:
        """Add the analysis' commands to the typer ``app``."""
        for target in self.cli:
            register = _resolve(target, f"analysis {self.name!r}: the command-line registration")
            register(app)


_LOADED: tuple[dict[str, Analysis], list[GapbenchError]] | None = None


def _entry_points() -> list[Any]:
    """The group's entry points of every distribution on the path. Not ``entry_points(group=...)`` alone: it keeps
    one distribution per name, the first found, and a ``gapbench.egg-info`` left in a checkout by an in-tree build
    would hide the installed metadata of the same name."""
    from importlib.metadata import distributions

    seen: set[tuple[str, str]] = set()
    found = []
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == GROUP and (ep.name, ep.value) not in seen:
                seen.add((ep.name, ep.value))
                found.append(ep)
    return found


def _where(ep: Any) -> str:
    dist = getattr(getattr(ep, "dist", None), "name", None)
    return f"entry point {ep.name!r} = {ep.value!r} of group {GROUP!r}" + (f" (distribution {dist})" if dist else "")


def load_entry_point(ep: Any) -> Analysis:
    """The :class:`Analysis` an entry point names, checked: importable, an Analysis, named as the entry point."""
    try:
        found = ep.load()
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"{_where(ep)} cannot be imported ({type(exc).__name__}: {exc}); reinstall the "
                          "distribution that declares it, or uninstall it.") from None
    if not isinstance(found, Analysis):
        raise PluginError(f"{_where(ep)} gives {type(found).__name__}, expected a gapbench.plugins.Analysis; point "
                          "the entry point at one.")
    if found.name != ep.name:
        raise PluginError(f"{_where(ep)} gives the analysis {found.name!r}; name the entry point as the analysis.")
    return found


def _load() -> tuple[dict[str, Analysis], list[GapbenchError]]:
    global _LOADED
    if _LOADED is None:
        found: dict[str, Analysis] = {}
        where: dict[str, str] = {}
        problems: list[GapbenchError] = []
        for ep in _entry_points():
            if ep.name in where:
                if where[ep.name] != ep.value:  # the same distribution twice on sys.path is one registration
                    problems.append(DuplicateNameError(
                        f"analysis {ep.name!r} is registered twice, as {where[ep.name]!r} and {ep.value!r}; "
                        "uninstall one of the distributions."))
                continue
            where[ep.name] = ep.value
            try:
                found[ep.name] = load_entry_point(ep)
            except GapbenchError as exc:
                problems.append(exc)
        _LOADED = dict(sorted(found.items())), problems
    return _LOADED


def analyses() -> dict[str, Analysis]:
    """Every registered analysis by name, in name order (the entry points are read once); a registration that
    cannot be used raises its :class:`PluginError`."""
    found, problems = _load()
    if problems:
        raise problems[0]
    return dict(found)


def usable_analyses() -> tuple[dict[str, Analysis], list[str]]:
    """The analyses that load, and one line for each registration that does not: what the command line uses, so
    that one broken plugin leaves every other command working."""
    found, problems = _load()
    return dict(found), [str(p) for p in problems]


def get_analysis(name: str) -> Analysis:
    """The analysis registered as ``name``; an unknown name lists what is registered."""
    known = analyses()
    if name not in known:
        raise UnknownNameError("analysis", name, known, "Analyses register through the entry-point group "
                                                        f"{GROUP!r}.")
    return known[name]


def forget() -> None:
    """Read the entry points again on the next call (after installing a plugin in the same process)."""
    global _LOADED
    _LOADED = None
