"""``gapbench cache info`` and ``gapbench cache clear [KIND]``: show or free the caches."""

from __future__ import annotations

import json

import typer

from ..errors import UnknownNameError
from .common import fail


def register(app: typer.Typer) -> None:
    """Add the ``cache`` group (info, clear) to ``app``."""
    cache_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Show or free the caches.")
    cache_app.command("info")(cache_info)
    cache_app.command("clear")(cache_clear)
    app.add_typer(cache_app, name="cache")


def cache_info(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where the caches are and how big."""
    from .. import cache

    info = cache.info()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"gapbench home: {info['home']} (set GAPBENCH_HOME to move it)")
    if not info["kinds"]:
        typer.echo("no caches yet")
    for kind, v in info["kinds"].items():
        typer.echo(f"  {kind}: {v['files']} files, {v['bytes'] / 1e6:.1f} MB  {v['path']}")


def cache_clear(kind: str | None = typer.Argument(None, help="Only this kind (e.g. embeddings).")) -> None:
    """Delete the caches (or one kind)."""
    from .. import cache

    if kind is not None and not kind.strip():
        fail("the cache KIND is empty; leave it out to clear every cache, or name one `gapbench cache info` lists.")
    if kind is not None:
        # only a kind that exists as a folder of the cache: '', '..' or '/' would reach outside one kind
        kinds = list(cache.info()["kinds"])
        if kind not in kinds:
            raise UnknownNameError("cache kind", kind, kinds, "Leave KIND out to clear every cache; "
                                   "`gapbench cache info` lists them.")
    freed = cache.clear(kind)
    typer.echo(f"freed {freed / 1e6:.1f} MB")
