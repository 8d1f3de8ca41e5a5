"""One generic registry for tasks, retrievers, rerankers and suites.

Entries are either objects or lazy ``"module:attr"`` strings that are imported on first use, so ``import gapbench``
never pulls in torch or an API SDK. Outside packages add entries through the entry-point group
``gapbench.<kind>`` (for example ``gapbench.retrievers``).

A registry is typed: it is told what its entries must be, and refuses anything else when it is registered (objects)
or first resolved (lazy strings), so a wrong entry fails where it was made rather than deep inside a run.
"""

from __future__ import annotations

import importlib
import inspect
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from .errors import ConfigError, DuplicateNameError, UnknownNameError

T = TypeVar("T")


def resolve_lazy(target: str) -> object:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def _spelling_hint(name: str, names: Iterable[str]) -> str:
    """Why a name that looks right is unknown: case, surrounding spaces, or non-ASCII look-alike characters."""
    names = list(names)
    odd = list(dict.fromkeys(ch for ch in name if not ch.isascii() or not ch.isprintable()))
    plain = unicodedata.normalize("NFKC", name).strip()
    same = [n for n in names if n.casefold() == plain.casefold()]
    target = f" {same[0]!r}" if same and same[0] != name else ""
    if odd:
        shown = ", ".join(f"{ch!r} (U+{ord(ch):04X})" for ch in odd[:3])
        return f"The name contains non-ASCII or invisible characters ({shown}); type{target or ' it'} in plain ASCII."
    if name != name.strip():
        return f"The name has spaces around it; write{target or ' it without them'}."
    return f"Names are case-sensitive: the registered name is{target}." if target else ""


def provides(base: type, *, factories: bool = False) -> Callable[[object], bool]:
    """A check that an entry is a ``base``: an instance, or (for a protocol, whose data members are often set in
    ``__init__``) an object with all its public methods. With ``factories`` an entry may also build one: a class that
    is one, or a function (its result is checked where it is called).

    >>> Registry("reranker", expects=provides(Reranker, factories=True), expected="a reranker")  # doctest: +SKIP
    """
    methods = [n for n, v in vars(base).items() if callable(v) and not n.startswith("_")]

    def has_methods(entry: object) -> bool:
        return bool(methods) and all(callable(getattr(entry, m, None)) for m in methods)

    def check(entry: object) -> bool:
        if not inspect.isclass(entry) and (isinstance(entry, base) or has_methods(entry)):
            return True
        if not factories:
            return False
        if inspect.isclass(entry):
            return _is_subclass(entry, base) or has_methods(entry)
        return callable(entry)

    return check


def _is_subclass(cls: type, base: type) -> bool:
    try:
        return issubclass(cls, base)
    except TypeError:  # a protocol with data members refuses issubclass; its methods are checked instead
        return False


def _described(entry: object) -> str:
    """What was given, in a few words: 'class Foo', 'function make_foo', 'int 3'."""
    if inspect.isclass(entry):
        return f"class {entry.__qualname__}"
    if inspect.isroutine(entry):
        return f"function {getattr(entry, '__qualname__', entry)}"
    shown = repr(entry)
    return f"{type(entry).__name__} {shown if len(shown) <= 40 else shown[:37] + '...'}"


class Registry(Generic[T]):
    def __init__(
        self,
        kind: str,
        *,
        hint: str = "",
        expects: type | Callable[[object], bool] | None = None,
        expected: str = "",
    ) -> None:
        """``expects``: a base class or protocol (see :func:`provides`) or a check function; ``expected`` says in
        words what passes, for the error message."""
        self.kind = kind
        self.hint = hint
        self._check = provides(expects) if inspect.isclass(expects) else expects
        self.expected = expected or (f"a {expects.__name__}" if inspect.isclass(expects) else "")
        self._entries: dict[str, object] = {}
        self._loaders: list[Callable[[], None]] = []
        self._entry_points_loaded = False

    def add_loader(self, loader: Callable[[], None]) -> None:
        """A callable that registers built-in entries the first time the registry is read."""
        self._loaders.append(loader)

    def _ensure_loaded(self) -> None:
        while self._loaders:
            self._loaders.pop(0)()
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            from importlib.metadata import entry_points

            for ep in entry_points(group=f"gapbench.{self.kind.replace(' ', '_')}s"):
                if ep.name not in self._entries:
                    self._entries[ep.name] = ep.value

    def register(self, name: str, obj: T | Callable[..., T] | str | None = None, *, replace: bool = False):
        """Register ``obj`` under ``name``; without ``obj`` this is a decorator.

        ``obj`` may be a lazy ``"module:attr"`` string.
        """

        def add(target):
            if name in self._entries and not replace:
                raise DuplicateNameError(
                    f"{self.kind} {name!r} is already registered; pick another name or pass replace=True."
                )
            if not isinstance(target, str) and not self._accepts(target):
                raise ConfigError(
                    f"{self.kind} {name!r}: got {_described(target)}, expected {self.expected}; register one, or a "
                    "lazy 'module:attr' string naming one."
                )
            self._entries[name] = target
            return target

        if obj is None:
            return add
        return add(obj)

    def _accepts(self, entry: object) -> bool:
        return self._check is None or self._check(entry)

    def has(self, name: str) -> bool:
        """Whether ``name`` is registered so far, without running the loaders, reading entry points or importing a
        lazy entry: what a loader asks before adding a built-in, so that an earlier registration wins."""
        return name in self._entries

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        self._ensure_loaded()
        if not isinstance(name, str) or name not in self._entries:
            name = name if isinstance(name, str) else repr(name)
            hint = " ".join(h for h in (_spelling_hint(name, self._entries), self.hint) if h)
            raise UnknownNameError(self.kind, name, self._entries, hint)
        entry = self._entries[name]
        if isinstance(entry, str):
            target, entry = entry, resolve_lazy(entry)
            if not self._accepts(entry):  # the string stays: every use fails the same way
                raise ConfigError(
                    f"{self.kind} {name!r}: {target!r} gives {_described(entry)}, expected {self.expected}; point "
                    "the 'module:attr' string at one."
                )
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def names(self) -> list[str]:
        self._ensure_loaded()
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
