"""From flags to an analysis' options, through one mapping per command.

Most commands generate their flags from the options' fields (:class:`gapbench.cli.from_options.FromOptions`, a
:class:`Flags`); the mapping below is what both kinds share, and what a command whose flags are written by hand uses.

Each analysis command declares, next to its flags, the :class:`Flags` that turn them into its ``XOptions``::

    GAP = Flags("gap", "gapbench.analyses.gap:GapOptions", cli_only={"task", "retrievers", "as_json"},
                parse={"pool_sizes": parse_pool_sizes})

    def gap_cmd(ctx: typer.Context, task: str = ..., depth: int = typer.Option(100, "--depth"), ...):
        options = GAP.build(ctx.params)

A parameter is a field of the options under its own name (or the one ``renamed`` gives), is parsed from its text by
``parse`` first, or is listed in ``cli_only`` (what is not a setting of the analysis: the task, the retrievers, output
format). The ``--llm-*`` sampling flags (:mod:`.llm_options`) configure every LLM client of the command and are never
options. An options field without a flag is named in ``library_only`` (Python objects such as extra qrels).

``tests/test_cli_contract.py`` checks every registered command against its options: every flag maps to a field, every
field but the library-only ones has a flag, and the flag's default is the field's. When the options refuse a value, the
message names the flag the user typed (``--depth must be at least 1, got 0``), never the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import OptionsError
from .common import fail

if TYPE_CHECKING:  # imported when a command runs: `gapbench --help` loads no pydantic
    from ..contract import Options

# every command whose flags build an analysis' options: command path ("argus audit") -> its Flags
REGISTRY: dict[str, Flags] = {}
SAMPLING = ("llm_temperature", "llm_top_p", "llm_max_tokens", "llm_seed", "llm_stop", "llm_extra")


@dataclass(frozen=True)
class Flags:
    """How the flags of ``command`` become ``options``; registered in :data:`REGISTRY` when made."""

    command: str
    options_class: type[Options] | str  # the class, or "module:Class" to import it only when the command runs
    cli_only: frozenset[str] = frozenset()
    renamed: Mapping[str, str] = field(default_factory=dict)  # parameter -> options field, where they differ
    parse: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)  # parameter -> its text read as the field
    library_only: frozenset[str] = frozenset()  # fields set from Python only

    def __post_init__(self) -> None:
        object.__setattr__(self, "cli_only", frozenset(self.cli_only))
        object.__setattr__(self, "library_only", frozenset(self.library_only))
        REGISTRY[self.command] = self

    @property
    def options(self) -> type[Options]:
        """The options class (imported on first use when given as ``"module:Class"``, so that ``gapbench --help`` and
        shell completion do not import the analyses)."""
        if isinstance(self.options_class, str):
            import importlib

            from ..contract import Options

            module, _, name = self.options_class.partition(":")
            found = getattr(importlib.import_module(module), name)
            if not (isinstance(found, type) and issubclass(found, Options)):
                raise TypeError(f"{self.options_class} is not an options class (contract.Options)")
            object.__setattr__(self, "options_class", found)
            return found
        return self.options_class

    def field_of(self, param: str) -> str | None:
        """The options field a parameter sets, or None for a CLI-only or sampling parameter."""
        if param in self.cli_only or param in SAMPLING:
            return None
        return self.renamed.get(param, param)

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``{field: value}`` from the command's parameters (``ctx.params``), each parsed where ``parse`` says."""
        out = {}
        for name, value in params.items():
            target = self.field_of(name)
            if target is None:
                continue
            out[target] = self.parse[name](value) if name in self.parse and value is not None else value
        return out

    def build(self, params: Mapping[str, Any], **extra: Any):
        """The options from the command's parameters (and ``extra`` fields set by the command itself); a value the
        options refuse ends the command with one line naming the flag."""
        try:
            return self.options(**self.values(params), **extra)
        except OptionsError as exc:
            fail("; ".join(f"{self.flag(f)} {message}" if f else message for f, message in exc.problems) + ".")

    def flag(self, field_name: str) -> str:
        """The flag the user types for an options field (``pool_sizes`` -> ``--pool-sizes``)."""
        param = next((p for p, f in self.renamed.items() if f == field_name), field_name.split(".")[0])
        ctx = _current_context()
        if ctx is not None:
            for p in ctx.command.params:
                if p.name == param and getattr(p, "opts", None):
                    longs = [o for o in p.opts if o.startswith("--")]
                    return (longs or p.opts)[0]
        return "--" + param.replace("_", "-")


def _current_context():
    """The running command's click context, from typer's own copy of click (typer >= 0.24) or the click package."""
    import importlib

    for module in ("typer._click", "typer._click.globals", "click"):
        try:
            get = importlib.import_module(module).get_current_context
        except (ImportError, AttributeError):
            continue
        ctx = get(silent=True)
        if ctx is not None:
            return ctx
    return None
