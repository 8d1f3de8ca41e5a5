"""Built-in task suites. Importing this module registers task factories and suites; it imports no heavy library."""

from . import beir, bright, impliret, irds, local_trec, musique, obliq, rarb, suites  # noqa: F401
