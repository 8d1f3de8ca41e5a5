"""The benchmark suites named in the papers gapbench follows."""

from __future__ import annotations

from gapbench.suites import SUITES, Suite

BRIGHT_DOMAINS = (
    "biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow", "sustainable_living",
    "leetcode", "pony", "aops", "theoremqa_questions", "theoremqa_theorems",
)
IMPLIRET = tuple(f"impliret/{c}/{s}" for c in ("multispeaker", "unispeaker")
                 for s in ("arithmetic", "wknow", "temporal"))
RARB = (
    "alphanli", "hellaswag", "piqa", "siqa", "quail", "ARC-Challenge", "winogrande", "spartqa", "math-pooled",
    "humanevalpack-mbpp-pooled", "TempReason-l1", "TempReason-l2-pure", "TempReason-l2-fact", "TempReason-l2-context",
    "TempReason-l3-pure", "TempReason-l3-fact", "TempReason-l3-context",
)
OBLIQ = ("twitter", "wildchat", "math", "writing", "congress")

_SUITES = [
    Suite("bright", tuple(f"bright/{d}" for d in BRIGHT_DOMAINS), "BRIGHT, all 12 domains (Su et al., 2024)."),
    Suite("impliret", IMPLIRET, "ImpliRet, all six sets (Taghavi et al., 2025); runs offline."),
    Suite("rarb", tuple(f"rarb/{t}" for t in RARB), "RAR-b full-retrieval tasks (Xiao et al., 2024)."),
    Suite("obliq", tuple(f"obliq/{t}" for t in OBLIQ), "OBLIQ-Bench, five oblique-query sets."),
    Suite(
        "argus-paper",
        # Table 5 of the paper: Biology Earth Econ Pony Psych Robot Stack Sust TheoQ TheoT (no LeetCode, no AoPS)
        tuple(f"bright/{d}" for d in BRIGHT_DOMAINS if d not in ("leetcode", "aops"))
        + ("impliret/multispeaker/wknow", "impliret/unispeaker/wknow")
        + tuple(f"rarb/{t}" for t in ("ARC-Challenge", "alphanli", "piqa", "siqa", "spartqa", "hellaswag",
                                      "winogrande")),
        "The selection evaluated in 'With Argus Eyes' (BRIGHT 10 domains, ImpliRet wknow, seven RAR-b tasks).",
    ),
]
for _suite in _SUITES:
    if not SUITES.has(_suite.name):
        SUITES.register(_suite.name, _suite)
