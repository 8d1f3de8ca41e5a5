"""A corpus of malformed and hostile inputs, replayed through the ``gapbench`` command line.

Each ``cases_*.py`` module in this folder defines ``CASES: list[Case]`` for one category of input (TREC files, BEIR
folders, names and options, measures, submissions, the CI gate, LLM endpoints, the process itself).
``tests/test_hostile.py`` replays every case and checks the CLI's contract:

- bad input exits 2 with exactly one line on stderr, ``gapbench: error: ...``, naming the file, line or id (the
  ``names`` of the case) and never a traceback;
- valid input exits 0; a planted regression exits 1;
- a case that hangs is stopped at ten times its ``timeout`` (30 s by default): the bound catches a hang (a read
  of ``/dev/zero``, a wait on a pipe), never a slow machine.

A case writes its inputs under a fresh temporary folder (``files``, or ``setup`` for links, pipes and the like) and
names them in ``argv`` with ``{tmp}``, which is replaced by that folder. The command runs with that folder as the
working directory, in-process through ``gapbench.cli.main`` (fast) or, with ``process=True``, as a real
``python -m gapbench`` process (pipes, standard input, signals). ``check``, when given, is called with that folder
once the command has ended, to assert what it left there (an interrupted write leaves nothing half-written).
``fixtures`` names pytest fixtures the case's test asks for first (``shipped_cached``, tests/fx_boards.py: the
committed submissions' validation, scores and miss profiles in gapbench's cache, as after a maintainer's build).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

Content = Union[str, bytes]


@dataclass(frozen=True)
class Case:
    id: str
    argv: Sequence[str]
    files: Mapping[str, Content] = field(default_factory=dict)
    expect: int = 2
    names: Sequence[str] = ()
    setup: Optional[Callable[[Path], None]] = None
    process: bool = False
    stdin: Optional[bytes] = None
    timeout: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    check: Optional[Callable[[Path], None]] = None
    fixtures: Sequence[str] = ()

    def materialise(self, tmp: Path) -> list[str]:
        """Write the case's files under ``tmp`` and return its argv with ``{tmp}`` filled in."""
        for rel, content in self.files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        if self.setup is not None:
            self.setup(tmp)
        return [a.replace("{tmp}", str(tmp)) for a in self.argv]

    def expected_names(self, tmp: Path) -> list[str]:
        return [n.replace("{tmp}", str(tmp)) for n in self.names]
