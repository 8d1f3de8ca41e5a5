"""One generic registry for tasks, retrievers, rerankers and suites.

Entries are either objects or lazy ``"module:attr"`` strings that are imported on first use, so ``import gapbench``
never pulls in torch or an API SDK. Outside packages add entries through the entry-point group
``gapbench.<kind>`` (for example ``gapbench.retrievers``).
"""

from __future__ import annotations

import importlib
import unicodedata
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from .errors import DuplicateNameError, UnknownNameError

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


class Registry(Generic[T]):
    def __init__(self, kind: str, *, hint: str = "") -> None:
        self.kind = kind
        self.hint = hint
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

    def register(self, name: str, obj: T | str | None = None, *, replace: bool = False):
        """Register ``obj`` under ``name``; without ``obj`` this is a decorator.

        ``obj`` may be a lazy ``"module:attr"`` string.
        """

        def add(target):
            if name in self._entries and not replace:
                raise DuplicateNameError(
                    f"{self.kind} {name!r} is already registered; pick another name or pass replace=True."
                )
            self._entries[name] = target
            return target

        if obj is None:
            return add
        return add(obj)

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
            entry = resolve_lazy(entry)
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
