"""The large-corpus options of ``gapbench run``: ``--memory-budget`` takes bytes or a number with a unit (KB, MB, GB,
KiB, MiB, GiB), at least 64 MiB. Anything else is refused in one line naming the option, the value and the accepted
forms before any work; a budget small enough to split the search into many batches still gives a run directory."""

from __future__ import annotations

from . import Case

TASK = "impliret/multispeaker/wknow"
RUN = ["run", TASK, "-r", "bm25", "-m", "nDCG@10"]
FORMS = "give bytes or a number with KB, MB, GB, KiB, MiB or GiB"


def budget(case_id: str, value: str, names) -> Case:
    return Case(case_id, [*RUN, "--memory-budget", value], names=tuple(names))


CASES = [
    budget("budget-word", "lots", ["--memory-budget 'lots' is not a size", FORMS]),
    budget("budget-unknown-unit", "4XB", ["--memory-budget '4XB' is not a size", "(e.g. 4GB)"]),
    budget("budget-negative", "-2GB", ["--memory-budget '-2GB' is not a size", FORMS]),
    budget("budget-two-numbers", "4 GB 2", ["--memory-budget '4 GB 2' is not a size"]),
    budget("budget-exponent", "1e9", ["--memory-budget '1e9' is not a size"]),
    budget("budget-too-small", "1MB", ["--memory-budget '1MB' is below the smallest budget", "64 MiB"]),
    budget("budget-zero", "0", ["--memory-budget '0' is below the smallest budget"]),
    budget("budget-empty", "", ["--memory-budget is empty"]),
    Case("budget-with-suite", ["run", "impliret", "-r", "bm25", "--memory-budget", "12 parsecs"],
         names=("--memory-budget '12 parsecs' is not a size",)),
    Case("budget-without-value", [*RUN, "--memory-budget"], names=("option '--memory-budget' requires an argument",)),
    # 64 MiB at k=1000 searches the 1,500 queries in batches of 83, each appended to run.trec.gz as it comes
    Case("valid-budget-small", [*RUN, "--k", "1000", "--memory-budget", "64MiB", "-o", "{tmp}/out"], expect=0),
    Case("valid-budget-bytes", [*RUN, "--k", "10", "--memory-budget", "3000000000", "--json"], expect=0),
]
