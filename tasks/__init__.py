"""Built-in task suites. Importing this module registers task factories; it imports no heavy library."""

from . import impliret  # noqa: F401
