"""The fused Triton score-and-select kernel (gapbench._topk_triton) under Triton's interpreter on the CPU.

Triton runs a kernel with numpy on the CPU when TRITON_INTERPRET=1 is in the environment as triton is imported: it
wraps its own library functions (tl.max, tl.argmax, ...) at import. Another test in the same process may have
imported triton already (torch.compile may), so the cases run in a fresh Python process with the variable set, all of
them one after another in one process per session (``python tests/test_topk_triton.py --all FOLDER``), or one
(``python tests/test_topk_triton.py <case>``). Sizes are small: the interpreter runs every program in Python.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest

from gapbench.topk import Allowed, DeviceDocs, dense_topk, tie_keys, torch_topk


class _LazyTorch:
    """torch, imported at its first use by a test rather than when pytest collects this file (three seconds of every
    start of the suite, the fast loop's included)."""

    def __getattr__(self, name: str):
        if name.startswith("_"):  # pytest's look for fixture and test markers on every name of the module
            raise AttributeError(name)
        import torch as module

        return getattr(module, name)


torch = _LazyTorch()

CASES: dict[str, Callable[[], None]] = {}


def case(fn: Callable[[], None]) -> Callable[[], None]:
    CASES[fn.__name__] = fn
    return fn


def _scores(q, d):
    return q.float() @ d.float().T


def _check_candidates(q, d, kc, **launch):
    """The kernel's (values, indices) against torch.topk over the float32 scores of the same float16 inputs."""
    from gapbench._topk_triton import candidates

    vals, idx = candidates(q, d, kc, **launch)
    s = _scores(q, d)
    want, _ = torch.topk(s, kc, dim=1)
    assert vals.dtype == torch.float32 and idx.dtype == torch.int64 and vals.shape == idx.shape == want.shape
    assert torch.equal(vals, want)  # the same values in the same (descending) order, ties included
    assert torch.equal(s.gather(1, idx), vals)  # each index holds the value reported for it
    assert all(len(set(row)) == kc for row in idx.tolist())  # no document twice
    return vals, idx


def _sixteenths(rng, rows, dim, span=8):
    """Multiples of 1/16 in [-span/16, span/16]: float16-exact, and every dot product exact in float32 in any order."""
    return torch.as_tensor(rng.integers(-span, span + 1, size=(rows, dim)) / 16, dtype=torch.float16)


@case
def candidates_equal_torch_topk_on_random_data():
    rng = np.random.default_rng(0)
    q, d = _sixteenths(rng, 21, 40), _sixteenths(rng, 300, 40)  # 21 rows: two query blocks, the second partial
    _check_candidates(q, d, 42, block_queries=16, block_docs=16, block_dim=16, splits=3)
    _check_candidates(q, d, 10)  # the default tiles (64 x 64 x 32) and split count


@case
def candidates_on_gaussian_data_within_float32_rounding():
    from gapbench._topk_triton import candidates

    g = torch.Generator().manual_seed(5)
    q, d = torch.randn(9, 48, generator=g).half(), torch.randn(250, 48, generator=g).half()
    vals, idx = candidates(q, d, 20, block_queries=16, block_docs=32, block_dim=16)
    s = _scores(q, d)
    want, want_idx = torch.topk(s, 20, dim=1)
    # summation order differs from torch's matmul: values within float32 rounding; no near-ties in this draw
    torch.testing.assert_close(vals, want, atol=1e-5, rtol=0)
    assert torch.equal(idx, want_idx)


@case
def candidates_with_many_exact_ties():
    rng = np.random.default_rng(1)
    q = torch.as_tensor(rng.integers(-1, 2, size=(17, 16)), dtype=torch.float16)
    d = torch.as_tensor(rng.integers(-1, 2, size=(200, 16)), dtype=torch.float16)
    d[50:120] = d[3]  # a seventy-way tie that straddles the cut
    vals, _ = _check_candidates(q, d, 24, block_queries=16, block_docs=16, block_dim=16, splits=4)
    row_ties = [(vals[r] == vals[r, -1]).sum().item() for r in range(17)]
    assert max(row_ties) > 5  # the boundary really is tied: the test exercises the strict "enters" compare


@case
def split_lists_pad_short_splits_with_minus_infinity():
    from gapbench._topk_triton import split_lists

    rng = np.random.default_rng(2)
    q, d = _sixteenths(rng, 5, 16), _sixteenths(rng, 37, 16)  # 37: not a multiple of the 16-document tile
    vals, idx = split_lists(q, d, 32, splits=3, block_queries=16, block_docs=16, block_dim=16)
    assert vals.shape == (5, 3 * 32)  # splits of 16, 16 and 5 documents
    finite = torch.isfinite(vals).view(5, 3, 32).sum(2)
    assert finite.tolist() == [[16, 16, 5]] * 5
    for r in range(5):  # the finite entries are each split's documents, every one once, with its score
        real = torch.isfinite(vals[r])
        assert sorted(idx[r][real].tolist()) == list(range(37))
        assert torch.equal(vals[r][real], _scores(q, d)[r, idx[r][real].long()])
    _check_candidates(q, d, 20, splits=3, block_queries=16, block_docs=16, block_dim=16)


@case
def candidates_all_documents_and_one_document():
    from gapbench._topk_triton import candidates

    rng = np.random.default_rng(3)
    q, d = _sixteenths(rng, 4, 24), _sixteenths(rng, 5, 24)
    _, idx = _check_candidates(q, d, 5)  # kc = n: every document, as torch_topk asks when k > n
    assert all(sorted(row) == [0, 1, 2, 3, 4] for row in idx.tolist())
    vals, idx = candidates(q, d[2:3], 1)
    assert idx.tolist() == [[0]] * 4 and torch.equal(vals, _scores(q, d[2:3]))
    with pytest.raises(ValueError, match="kc=6 must lie in 1..5"):
        candidates(q, d, 6)


def _spy(monkeypatch, module, name):
    """Record the positional arguments of every call of ``module.name``."""
    calls = []
    real = getattr(module, name)

    def wrapped(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@case
def torch_topk_triton_equals_torch_and_dense_topk():
    """Ties broken by the tie key, masked chunks (torch path), flagged rows (line test) and several blocks."""
    from gapbench import _topk_triton
    from gapbench import topk as topk_module

    rng = np.random.default_rng(4)
    q = (rng.integers(-8, 9, size=(12, 16)) / 16).astype(np.float32)
    d = (rng.integers(-8, 9, size=(150, 16)) / 16).astype(np.float32)
    d[10] = d[11]
    d[40:90] = d[5]  # a fifty-way tie: rows whose cut falls in it are flagged by the line test
    keys = tie_keys([f"d{i:03d}" for i in rng.permutation(150)])
    excluded: list[np.ndarray | Allowed | None] = [None] * 12
    excluded[9] = np.array([3, 10, 41])  # the last chunk carries masks: it takes the torch path
    excluded[10] = Allowed(np.array([5, 40, 41, 120]))
    monkeypatch = pytest.MonkeyPatch()
    fused = _spy(monkeypatch, _topk_triton, "candidates")
    flagged = _spy(monkeypatch, topk_module, "_exact_rows")
    try:
        for k, margin in ((10, 0), (3, 32), (200, 0)):  # 200 > 150 documents
            want = dense_topk(q, d, k, keys, excluded)
            for block_rows in (None, 80):
                docs = DeviceDocs(d, keys, "cpu", low_precision=True, block_rows=block_rows)
                tile_bytes = 4 * 4 * (k + 32) * 16  # chunks of 4 queries (torch_topk's chunk rule)
                by = {sel: torch_topk(q, docs, k, excluded, tile_bytes=tile_bytes, candidate_margin=margin,
                                      selector=sel) for sel in ("torch", "triton")}
                for got in by.values():
                    assert [g[0].tolist() for g in got] == [w[0].tolist() for w in want]
                    assert [g[1].tolist() for g in got] == [w[1].tolist() for w in want]
        # chunks of 4 queries; the masked one is not fused
        assert fused and all(args[0].shape[0] == 4 for args in fused)
        assert any(args[1].numel() for args in flagged)  # some rows went through the exact re-selection
    finally:
        monkeypatch.undo()  # the cases share one process: the next one sees the real functions


def compiles_for_a_cuda_gpu():
    """The kernel compiled as on an H100/H200 (sm_90), down to a cubin: Triton and its bundled ptxas need no GPU for
    that, so a kernel that the interpreter accepts but the compiler rejects (loop-carried types, shapes) fails here."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gapbench._topk_triton import BLOCK_DIM, BLOCK_DOCS, BLOCK_QUERIES, MAX_KC, _kernel

    signature = {"q_ptr": "*fp16", "d_ptr": "*fp16", "out_v_ptr": "*fp32", "out_i_ptr": "*i32", **dict.fromkeys(
        ("n_rows", "n_docs", "dim", "docs_per_split", "n_splits", "stride_q", "stride_d"), "i32"),
        **dict.fromkeys(("BM", "BN", "BK", "KC"), "constexpr")}
    for width in (16, 64, MAX_KC):
        constants = {"BM": BLOCK_QUERIES, "BN": BLOCK_DOCS, "BK": BLOCK_DIM, "KC": width}
        compiled = triton.compile(ASTSource(fn=_kernel(), signature=signature, constexprs=constants),
                                  target=GPUTarget("cuda", 90, 32))
        assert compiled.asm["cubin"] and ".target sm_90" in compiled.asm["ptx"]


NO_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                               reason="triton installs with gapbench[dev] on Linux x86-64")


@NO_TRITON
def test_selector_errors_and_auto(monkeypatch):
    from gapbench import _topk_triton
    from gapbench._topk_triton import use_kernel as _use_triton
    from gapbench.errors import ConfigError

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rng = np.random.default_rng(5)
    q, d = rng.normal(size=(3, 8)).astype(np.float32), rng.normal(size=(20, 8)).astype(np.float32)
    docs = DeviceDocs(d, tie_keys([f"d{i}" for i in range(20)]), "cpu", low_precision=True)
    with pytest.raises(ConfigError, match="selector='triton' cannot run here: .*device 'cpu'.*CUDA"):
        torch_topk(q, docs, 2, selector="triton")
    with pytest.raises(ConfigError, match="unknown selector 'fast'; accepted: 'auto', 'torch', 'triton'"):
        torch_topk(q, docs, 2, selector="fast")
    import triton.language  # noqa: F401  (imported before the variable is set, as in a test run that compiled a model)

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ConfigError, match="TRITON_INTERPRET=1 was set after triton was imported"):
        torch_topk(q, docs, 2, selector="triton")
    monkeypatch.delenv("TRITON_INTERPRET")
    cuda = torch.device("cuda")  # resolving the selector reads the card's capability, never its memory
    for capability, chosen in (((7, 5), False), ((8, 0), True), ((9, 0), True)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device, c=capability: c)
        assert _use_triton("auto", cuda) is chosen and _use_triton("triton", cuda) and not _use_triton("torch", cuda)
    assert not _use_triton("auto", torch.device("cpu"))
    monkeypatch.setitem(sys.modules, "triton.language", None)  # as if triton were not installed
    with pytest.raises(ConfigError, match="'triton' is not installed.*pip install triton"):
        torch_topk(q, docs, 2, selector="triton")
    assert not _use_triton("auto", cuda)
    fused = _spy(monkeypatch, _topk_triton, "candidates")
    got = torch_topk(q, docs, 2, selector="auto")  # auto on the CPU: torch.topk
    assert not fused and [g[0].tolist() for g in got] == [w[0].tolist() for w in dense_topk(q, d, 2, docs.keys.numpy())]


def _env(interpret: str) -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": interpret, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "TRITON_DEFAULT_FP_FUSION": "1"}  # the default of triton 3.9, set to silence its warning


def _run_case(name: str, interpret: str) -> None:
    proc = subprocess.run([sys.executable, __file__, name], env=_env(interpret), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"case {name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip() == f"ok {name}"


@pytest.fixture(scope="module")
def interpreted(once_per_session):
    """Every interpreter case run once in the session, one after another in one fresh process (a process costs
    seconds of imports; each case is a few): a folder with ``<case>.txt`` per case, "ok" or its traceback."""
    def make(folder):
        proc = subprocess.run([sys.executable, __file__, "--all", str(folder)], env=_env("1"), capture_output=True,
                              text=True, timeout=900)
        (folder / "process.txt").write_text(f"exit status {proc.returncode}\n{proc.stdout}\n{proc.stderr}")

    return once_per_session("topk-triton-interpreter", make)


@NO_TRITON
@pytest.mark.parametrize("name", sorted(CASES))
def test_under_the_interpreter(name, interpreted):
    result = interpreted / f"{name}.txt"
    assert result.exists(), f"case {name} did not run:\n{(interpreted / 'process.txt').read_text()}"
    assert result.read_text() == "ok", f"case {name} failed:\n{result.read_text()}"


@NO_TRITON
def test_the_kernel_compiles_for_a_cuda_gpu_without_one():
    _run_case("compiles_for_a_cuda_gpu", "0")


if __name__ == "__main__":  # in a process that set TRITON_INTERPRET=1 (or 0) before importing triton
    torch.set_num_threads(1)  # thousands of tiny operations: spinning OpenMP workers slow them on shared cores
    if sys.argv[1] == "--all":  # every interpreter case, each result in its own file of the folder given
        import traceback
        from pathlib import Path

        for name, fn in sorted(CASES.items()):
            try:
                fn()
                outcome = "ok"
            except BaseException:  # noqa: BLE001 -- recorded for the case's test to report
                outcome = traceback.format_exc()
            (Path(sys.argv[2]) / f"{name}.txt").write_text(outcome)
    else:  # one case
        {**CASES, "compiles_for_a_cuda_gpu": compiles_for_a_cuda_gpu}[sys.argv[1]]()
        print("ok", sys.argv[1])
