"""Start-up: how long `gapbench --version`, `gapbench --help` and `gapbench COMMAND --help` take, for every command.

Each is `python -m gapbench ...` in its own process, as a user starts it (interpreter start and imports count), on a
warm disk (one untimed run first); wall time around the child, CPU time (user + system) from ``os.wait4``; the median
of ``--reps`` runs. The commands are read from the CLI itself (groups and their sub-commands), so a new command is
measured without editing this file. Target (issue 46): at most 0.3 s each. With ``--importtime N`` the N slowest
imports (cumulative, ``python -X importtime``) of `gapbench run --help` are printed too.

    python benchmarks/bench_startup.py                 # every command, 3 runs each
    python benchmarks/bench_startup.py --reps 5 --importtime 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from _common import load_note, run_child  # benchmarks/ is on sys.path when a script runs

TARGET = 0.3


def timed(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python -m gapbench ARGS``, its output dropped."""
    m = run_child(args, dict(os.environ))
    return m["wall"], m["cpu"]


def commands() -> list[list[str]]:
    """Every command path of the CLI: ``["run"]``, ``["cache", "info"]``, ..., read in a child process."""
    code = ("import typer.main, json; from gapbench.cli import app\n"
            "def walk(cmd, path):\n"
            "    subs = getattr(cmd, 'commands', None)\n"
            "    if not subs: return [path]\n"
            "    inner = [p for name in sorted(subs) for p in walk(subs[name], path + [name])]\n"
            "    return ([path] if path else []) + inner\n"
            "print(json.dumps(walk(typer.main.get_command(app), [])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="runs per command (median; default 3)")
    ap.add_argument("--importtime", type=int, default=0, help="print the N slowest imports of `gapbench run --help`")
    args = ap.parse_args(argv)
    print(f"start: {load_note()}")
    lines = [["--version"], ["--help"], *([*path, "--help"] for path in commands())]
    timed(["--version"])  # a warm disk: the first start reads the files
    rows = []
    for line in lines:
        runs = [timed(line) for _ in range(args.reps)]
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        rows.append((" ".join(line), wall, cpu))
        print(f"  gapbench {' '.join(line):<40} wall {wall:5.2f} s  cpu {cpu:5.2f} s"
              f"{'' if wall <= TARGET else '  (over 0.3 s)'}", flush=True)
    worst = max(rows, key=lambda r: r[1])
    over = [r for r in rows if r[1] > TARGET]
    print(f"end: {load_note()}")
    print(f"slowest: gapbench {worst[0]} {worst[1]:.2f} s wall; median over commands "
          f"{statistics.median(r[1] for r in rows):.2f} s; {len(over)} of {len(rows)} over {TARGET} s")
    if args.importtime:
        err = subprocess.run([sys.executable, "-X", "importtime", "-m", "gapbench", "run", "--help"],
                             capture_output=True, text=True).stderr
        found = []
        for text in err.splitlines():
            if text.startswith("import time:") and "|" in text:
                _, cumulative, name = text.split("|")
                if cumulative.strip().isdigit():
                    found.append((int(cumulative), name.rstrip()))
        print("slowest imports of `gapbench run --help` (cumulative, ms):")
        for cumulative, name in sorted(found, reverse=True)[:args.importtime]:
            print(f"  {cumulative / 1000:8.1f}  {name}")
    print(f"{'PASS' if not over else 'MISS'}: every command starts in at most {TARGET} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
