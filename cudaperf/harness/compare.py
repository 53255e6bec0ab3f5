"""Compare a candidate's outputs with the reference's, element by element, with the task's tolerance."""

from __future__ import annotations

import numpy as np

from cudaperf.harness.result import Mismatch
from cudaperf.tasks.schema import Tolerance


def compare_arrays(name: str, expected, got, tol: Tolerance, *, is_float: bool) -> Mismatch | None:
    """None when ``got`` matches ``expected``; else the first mismatch and the error over all elements.

    Floats pass when ``|got - exp| <= atol + rtol * |exp|``; a NaN or Inf in ``got`` fails unless the reference
    has the same non-finite value at that position. Integers must match exactly. A length difference fails.
    """
    exp = np.atleast_1d(np.asarray(expected))
    g = np.atleast_1d(np.asarray(got))
    if exp.shape != g.shape:
        return Mismatch(output=name, index=-1, expected=f"{exp.size} elements", got=f"{g.size} elements",
                        max_abs_err=float("inf"), max_rel_err=float("inf"), n_bad=max(exp.size, g.size),
                        n_total=exp.size)
    if exp.size == 0:
        return None
    if is_float:
        if exp.dtype == g.dtype and np.array_equal(exp, g):
            return None  # equal everywhere (NaN never compares equal, so NaNs take the full path): one pass
        e = exp.astype(np.float64)
        x = g.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(x - e)
            ok = diff <= tol.atol + tol.rtol * np.abs(e)
            ok &= np.isfinite(x)
            if not ok.all():  # non-finite values pass only where the reference has the same one
                ok |= (~np.isfinite(e)) & ((np.isnan(e) & np.isnan(x)) | (e == x))
            if ok.all():
                return None  # the error summary below is only for a mismatch
            finite = np.isfinite(e) & np.isfinite(x)
            abs_err = float(np.max(diff[finite])) if finite.any() else 0.0
            rel = diff[finite] / np.maximum(np.abs(e[finite]), np.finfo(np.float64).tiny)
            rel_err = float(np.max(rel)) if rel.size else 0.0
            if (~np.isfinite(x) & np.isfinite(e)).any():
                abs_err = rel_err = float("inf")
    else:
        if np.array_equal(exp, g):
            return None
        e = exp.astype(np.int64) if exp.dtype.kind != "u" else exp.astype(np.uint64)
        x = g.astype(e.dtype)
        ok = e == x
        d = np.abs(e.astype(np.float64) - x.astype(np.float64))
        abs_err = float(d.max())
        rel_err = float((d / np.maximum(np.abs(e.astype(np.float64)), 1.0)).max())
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    return Mismatch(output=name, index=i, expected=exp[i].item(), got=g[i].item(), max_abs_err=abs_err,
                    max_rel_err=rel_err, n_bad=int(bad.size), n_total=int(exp.size))


def describe_mismatch(m: Mismatch) -> str:
    if m.index < 0:
        return f"{m.output}: expected {m.expected}, got {m.got}"
    return (f"{m.output}[{m.index}]: expected {m.expected!r}, got {m.got!r} "
            f"({m.n_bad} of {m.n_total} elements wrong; max abs err {m.max_abs_err:.3g}, "
            f"max rel err {m.max_rel_err:.3g})")
