"""``python -m gapbench``.

Ctrl-C or SIGTERM while the command line is still loading (before ``main`` takes the signals over) or after it has
returned also ends with one line and 128 + the signal number, not a traceback: no file is open for writing then.
"""

import os
import signal
import sys


def _stop_while_loading(signum, frame):
    name = signal.Signals(signum).name
    line = f"gapbench: interrupted by {name}; nothing half-written was left, and finished work (caches) is kept.\n"
    try:
        sys.stdout.flush()  # after main returned, its output is complete: keep it
    except Exception:
        pass
    os.write(2, line.encode())
    os._exit(128 + signum)  # an exception raised here could land in an import's callback, where Python drops it


def entry() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop_while_loading)
    from gapbench.cli import main
    from gapbench.cli.quiet import quiet_third_parties

    quiet_third_parties()  # before any command imports transformers, torch or scikit-learn

    return main()


if __name__ == "__main__":
    sys.exit(entry())
