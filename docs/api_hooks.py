"""mkdocs hooks for the API reference (docs/api*.md).

mkdocstrings finds modules on ``sys.path``, whose first entry is the folder of the ``mkdocs`` script, the venv's bin/,
where the ``gapbench`` console script would be read as the module ``gapbench``: the folders holding such a file leave
the search, so the installed package is the one found. And the docstrings cross-reference in Sphinx's roles
(``:func:`rank_key```, ``:class:`~gapbench.types.Run```), which the Markdown renderer leaves as text before the code:
the role and the tilde are dropped from the rendered page, leaving the name as code."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any


def on_startup(command: str, dirty: bool) -> None:
    # before any plugin's on_config: mkdocstrings fixes its search paths when it sets up its handler
    sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "gapbench").is_file()]


_ROLE = re.compile(r":(?:func|class|meth|attr|mod|data|exc|obj|ref):(<code>)~?")


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    if not page.file.src_uri.startswith("api"):
        return html
    return _ROLE.sub(r"\1", html)
