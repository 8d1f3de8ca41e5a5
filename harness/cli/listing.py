"""Help texts that list what is registered (retrievers, rerankers), built from the registries when the help is shown.

Built at help time, not at import: reading a registry loads the built-in adapters' entries and scans the installed
packages' entry points, which every other command should not pay for; and a list written by hand goes stale (the
help once named three of twelve retrievers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from typer.core import TyperCommand


def registered(kind: str) -> list[str]:
    """The names registered as ``kind`` (``retriever`` or ``reranker``), built-ins and plugins alike."""
    from .. import retrieval

    retrieval._ensure_builtin()
    registry = {"retriever": retrieval.RETRIEVERS, "reranker": retrieval.RERANKERS}[kind]
    return registry.names()


def completion(kind: str) -> Callable[[str], list[str]]:
    """Shell completion of an option naming a ``kind``: the registered names that start with what was typed (a
    spec's options, after ``:``, are the user's)."""

    def complete(incomplete: str) -> list[str]:
        if ":" in incomplete:
            return []
        return [name for name in registered(kind) if name.startswith(incomplete)]

    return complete


def listing_command(helps: Mapping[str, Callable[[], str]]) -> type[TyperCommand]:
    """A command class whose options named in ``helps`` (parameter name -> help builder) get their help text when
    ``--help`` is shown."""

    class ListingCommand(TyperCommand):
        def format_help(self, ctx, formatter):
            # set for this help only: a generated parameter is shared by every build of the command
            # (gapbench.cli.from_options) and keeps its field's description
            shown = {param: param.help for param in self.params if param.name in helps}
            try:
                for param in shown:
                    param.help = helps[param.name]()
                return super().format_help(ctx, formatter)
            finally:
                for param, text in shown.items():
                    param.help = text

    return ListingCommand
