"""What dense says about its own speed and its model folder: the faster CPU path when the torch encoder would be slow,
and a model that cannot be loaded in gapbench's words.

The speed-up is measured, not guessed: ``benchmarks/results/bench_onnx_cpu.txt`` (5,000 ImpliRet passages,
all-MiniLM-L6-v2, 2 threads): OpenVINO float32 ran 1.58x torch's wall time (the same vectors, within 3e-7), and
torch's steady rate was 4,717 tokens a second, about 2,360 per thread.
"""

from __future__ import annotations

from gapbench.errors import GapbenchError

# measured (bench_onnx_cpu.txt): torch float32 on the CPU, all-MiniLM-L6-v2, tokens a second per thread; a larger
# model is slower, so the estimate below is a lower bound on the time
TORCH_TOKENS_PER_THREAD_S = 2_360
OPENVINO_SPEEDUP = 1.58
CHARS_PER_TOKEN = 4  # English text through a WordPiece vocabulary: about four characters a token
HINT_AFTER_S = 60.0


def cpu_hint(name: str, characters: int, threads: int) -> str | None:
    """One line naming ``dense:backend=openvino`` when encoding ``characters`` of text with torch on ``threads`` CPU
    threads is estimated to take more than a minute, else None.

    >>> cpu_hint("dense", 40_000_000, 2)  # doctest: +SKIP
    'dense: encoding on the CPU with torch takes at least 35 minutes here; dense:backend=openvino is 1.58x faster ...'
    """
    seconds = characters / CHARS_PER_TOKEN / (TORCH_TOKENS_PER_THREAD_S * max(threads, 1))
    if seconds <= HINT_AFTER_S:
        return None
    minutes = seconds / 60
    took = f"{minutes:.0f} minutes" if minutes >= 1.5 else "a minute"
    return (f"{name}: encoding on the CPU with torch takes at least {took} here; dense:backend=openvino gives the "
            f"same vectors {OPENVINO_SPEEDUP}x faster (bfloat16 3x, benchmarks/results/bench_onnx_cpu.txt; pip "
            "install 'gapbench[openvino]')")


def load_error(model: str, where: str, exc: BaseException, offline: bool) -> GapbenchError:
    """A model folder or name that sentence-transformers or transformers cannot load, said in one line naming it and
    what the library found (its first line), instead of the library's traceback."""
    first = (str(exc).strip().splitlines() or [""])[0][:300].rstrip(".")
    fix = ("HF_HUB_OFFLINE=1 is set: give a local path with dense:model=/path/to/model." if offline else
           "Check the name, or give a local path with dense:model=/path/to/model.")
    shown = f"{model!r}" + (f" (folder {where})" if where != model else "")
    return GapbenchError(f"dense: cannot load model {shown}: {type(exc).__name__}: {first}. A model folder holds a "
                         f"sentence-transformers or transformers model (config.json and its weights). {fix}")
