"""The process-wide sign that the command is ending (Ctrl-C or SIGTERM, set by the CLI's signal handler).

Signal handlers run in the main thread only; threads that wait on the network (LLM calls) look at this flag between
short waits and give up, so the main thread's clean-up does not sit for minutes on answers nobody will read.
"""

from __future__ import annotations

import threading

STOP = threading.Event()
