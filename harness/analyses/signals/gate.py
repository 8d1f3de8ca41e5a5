"""The gate calibrated on the signals: a floor on one signal (or two floors, on either of two signals firing) chosen
on a seeded stratified calibration split, with its catch and false-alarm rates on the held-out split, and the same
rules applied to new values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import ConfigError, GapbenchError
from .definitions import EXPECTED
from .signal_stats import auc, oriented, separation


def stratified_split(labels: npt.ArrayLike, fraction: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a seeded stratified split: (calibration, held-out); each class contributes round(fraction * n)."""
    if not 0 < fraction < 1:
        raise ConfigError(f"calib_fraction (the calibration share) must be between 0 and 1, got {fraction}.")
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    calib, held = [], []
    for cls in (0, 1):
        idx = np.flatnonzero(y == cls)
        idx = idx[rng.permutation(idx.size)]
        cut = int(round(fraction * idx.size))
        calib.append(idx[:cut])
        held.append(idx[cut:])
    return np.sort(np.concatenate(calib)), np.sort(np.concatenate(held))


def candidate_floors(oriented_values: npt.ArrayLike) -> np.ndarray:
    u = np.unique(np.asarray(oriented_values, dtype=np.float64))
    if u.size == 0:
        return np.array([0.0])
    step = float(u[-1] - u[0]) or 1.0
    mids = (u[:-1] + u[1:]) / 2
    return np.concatenate([[u[0] - step], mids, [u[-1] + step]])


def gate_rates(labels: npt.ArrayLike, oriented_values: npt.ArrayLike, floor: float) -> dict[str, float | int | None]:
    """Catch rate (recall of weak), false-alarm rate, escalated share and Youden J when escalating below ``floor``."""
    return escalation_rates(labels, np.asarray(oriented_values, dtype=np.float64) < floor)


def escalation_rates(labels: npt.ArrayLike, escalate: npt.ArrayLike) -> dict[str, float | int | None]:
    """Catch rate, false-alarm rate, escalated share and Youden J of any 0/1 escalation decision."""
    y = np.asarray(labels, dtype=bool)
    esc = np.asarray(escalate, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    catch = float((esc & y).sum() / n1) if n1 else None
    fa = float((esc & ~y).sum() / n0) if n0 else None
    return {
        "n": int(y.size), "n_weak": n1, "catch_rate": catch, "false_alarm_rate": fa,
        "escalated_share": float(esc.mean()) if y.size else None,
        "youden_j": catch - fa if catch is not None and fa is not None else None,
    }


def youden_floor(labels: npt.ArrayLike, oriented_values: npt.ArrayLike) -> float:
    """Floor maximising catch rate minus false-alarm rate (ties: the lowest floor, i.e. fewest escalations)."""
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(oriented_values, dtype=np.float64)
    if y.all() or not y.any():
        raise GapbenchError("the Youden point needs both weak and good retrievals in the calibration split.")
    floors = candidate_floors(v)
    best, best_j = float(floors[0]), -math.inf  # the first candidate's J is finite, so it is always taken
    for f in floors:
        esc = v < f
        j = (esc & y).sum() / y.sum() - (esc & ~y).sum() / (~y).sum()
        if j > best_j + 1e-12:
            best, best_j = float(f), j
    return best


def catch_floor(labels: npt.ArrayLike, oriented_values: npt.ArrayLike, target: float) -> float:
    """Lowest floor whose catch rate on these queries reaches ``target``."""
    if not 0 < target <= 1:
        raise ConfigError(f"target_catch must be in (0, 1], got {target}.")
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(oriented_values, dtype=np.float64)
    if not y.any():
        raise GapbenchError("a target catch rate needs weak retrievals in the calibration split.")
    for f in candidate_floors(v):
        if (v[y] < f).mean() >= target - 1e-12:
            return float(f)
    raise GapbenchError("no floor reaches the target catch rate")  # unreachable: the top floor catches all


def _rule(signal: str, orientation: str, floor: float) -> tuple[float, str]:
    if orientation == "lower_is_weaker":
        return floor, f"{signal} < {floor:.6g}"
    return -floor, f"{signal} > {-floor:.6g}"


def calibrate_gate(
    labels: npt.ArrayLike, values: npt.ArrayLike, signal: str, *, calib_fraction: float = 0.5, seed: int = 0,
    target_catch: float | None = None, orientation: str | None = None,
) -> dict[str, Any]:
    """Orientation and floor from a seeded stratified calibration split; rates on it and on the held-out split."""
    y = np.asarray(labels, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    y, v = y[ok], v[ok]
    cal, held = stratified_split(y, calib_fraction, seed)
    if orientation is None:
        _, orientation, _ = separation(y[cal], v[cal], EXPECTED.get(signal, "lower_is_weaker"))
    o = oriented(v, orientation)
    if target_catch is None:
        floor, method = youden_floor(y[cal], o[cal]), "youden"
    else:
        floor, method = catch_floor(y[cal], o[cal], target_catch), "catch_rate"
    threshold, rule = _rule(signal, orientation, floor)
    out: dict[str, Any] = {
        "signal": signal, "orientation": orientation, "method": method, "target_catch": target_catch,
        "floor": floor, "threshold": threshold, "rule": rule, "calib_fraction": calib_fraction, "seed": seed,
    }
    for name, idx in (("calibration", cal), ("held_out", held)):
        rates = gate_rates(y[idx], o[idx], floor)
        sep = auc(y[idx], -o[idx])
        rates["separation"] = None if math.isnan(sep) else sep
        out[name] = rates
    return out


def apply_gate(values: npt.ArrayLike, gate: Mapping[str, Any]) -> np.ndarray:
    """0/1 escalation flags: escalate when the oriented value is below the floor, or when the value is missing."""
    o = oriented(values, gate["orientation"])
    return np.where(np.isfinite(o), o < float(gate["floor"]), True).astype(np.int64)


# ------------------------------------------------------------------ gate on either firing

EITHER_MAX_CORR = 0.3  # "barely correlate": |Spearman| below 0.3, the usual bound of a weak monotone association


def either_pair(kept: Sequence[str], correlations: Mapping[str, Mapping[str, float | None]],
                max_corr: float = EITHER_MAX_CORR) -> tuple[str, str] | None:
    """The first pair of kept signals (kept is strongest first, so the strongest such pair) with |Spearman| below
    ``max_corr``; None when no pair of kept signals barely correlates."""
    for a, b in combinations(kept, 2):
        rho = correlations.get(a, {}).get(b)
        if rho is not None and not math.isnan(rho) and abs(rho) < max_corr:
            return a, b
    return None


def either_floors(labels: npt.ArrayLike, o1: npt.ArrayLike, o2: npt.ArrayLike,
                  target_catch: float | None = None) -> tuple[float, float]:
    """Floors ``(f1, f2)`` of the gate "escalate when o1 < f1 or o2 < f2", chosen jointly on these queries.

    Youden (default): the pair with the highest catch rate minus false-alarm rate; with ``target_catch``: the pairs
    whose catch rate reaches it, the one with the fewest escalations (then the highest catch rate). Remaining ties:
    fewest escalations, then the lowest f1, then the lowest f2. Candidates are :func:`candidate_floors` of each signal.
    """
    y = np.asarray(labels, dtype=bool)
    v1, v2 = np.asarray(o1, dtype=np.float64), np.asarray(o2, dtype=np.float64)
    if y.all() or not y.any():
        raise GapbenchError("the either gate needs both weak and good retrievals in the calibration split.")
    if target_catch is not None and not 0 < target_catch <= 1:
        raise ConfigError(f"target_catch must be in (0, 1], got {target_catch}.")
    c2 = candidate_floors(v2)
    n1, n0 = int(y.sum()), int((~y).sum())
    best: tuple[float, float] | None = None
    best_key: tuple[float, float] | None = None
    for f1 in candidate_floors(v1):
        first = v1 < f1
        # for every f2 at once: the queries the first signal leaves, escalated by the second when below f2
        weak = int((first & y).sum()) + np.searchsorted(np.sort(v2[~first & y]), c2, side="left")
        good = int((first & ~y).sum()) + np.searchsorted(np.sort(v2[~first & ~y]), c2, side="left")
        catch, fa, esc = weak / n1, good / n0, weak + good
        if target_catch is None:
            keys = np.stack([catch - fa, -esc], axis=1)
        else:
            keys = np.stack([np.where(catch >= target_catch - 1e-12, -esc, -np.inf), catch], axis=1)
        j = int(np.lexsort((-np.arange(c2.size), keys[:, 1], keys[:, 0]))[-1])  # max key, lowest f2 among ties
        key = (round(float(keys[j, 0]), 12), float(keys[j, 1]))
        if best_key is None or key > best_key:
            best, best_key = (float(f1), float(c2[j])), key
    if best is None:  # unreachable: candidate_floors gives at least one floor, and the first pair is always taken
        raise GapbenchError("the either gate found no candidate floors.")
    return best


def calibrate_either(
    labels: npt.ArrayLike, values1: npt.ArrayLike, values2: npt.ArrayLike, signals: tuple[str, str], *,
    calib_fraction: float = 0.5, seed: int = 0, target_catch: float | None = None,
) -> dict[str, Any]:
    """The gate on either of two signals firing: orientations and joint floors (:func:`either_floors`) from the
    seeded stratified calibration split of the queries where both are defined; rates on it and on the held-out split."""
    y = np.asarray(labels, dtype=np.int64)
    v = np.stack([np.asarray(values1, dtype=np.float64), np.asarray(values2, dtype=np.float64)])
    ok = np.isfinite(v).all(axis=0)
    y, v = y[ok], v[:, ok]
    cal, held = stratified_split(y, calib_fraction, seed)
    orient = [separation(y[cal], v[i][cal], EXPECTED.get(signals[i], "lower_is_weaker"))[1] for i in (0, 1)]
    o = np.stack([oriented(v[i], orient[i]) for i in (0, 1)])
    floors = either_floors(y[cal], o[0][cal], o[1][cal], target_catch)
    rules = [_rule(signals[i], orient[i], floors[i]) for i in (0, 1)]
    out: dict[str, Any] = {
        "signals": list(signals), "orientations": orient, "method": "youden" if target_catch is None else "catch_rate",
        "target_catch": target_catch, "floors": list(floors), "thresholds": [r[0] for r in rules],
        "rule": " or ".join(r[1] for r in rules), "calib_fraction": calib_fraction, "seed": seed,
    }
    esc = (o[0] < floors[0]) | (o[1] < floors[1])
    for name, idx in (("calibration", cal), ("held_out", held)):
        out[name] = escalation_rates(y[idx], esc[idx])
    return out


def apply_either(values1: npt.ArrayLike, values2: npt.ArrayLike, gate: Mapping[str, Any]) -> np.ndarray:
    """0/1 flags of the either gate: escalate when either stored gate fires (a missing value fires)."""
    flags = [apply_gate(v, {"orientation": o, "floor": f})
             for v, o, f in zip((values1, values2), gate["orientations"], gate["floors"])]
    return (flags[0] | flags[1]).astype(np.int64)
