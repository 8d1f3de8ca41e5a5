"""Built-in task suites. Importing this module registers task factories and suites; it imports no heavy library."""

from . import impliret, suites  # noqa: F401
