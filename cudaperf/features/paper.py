"""The "paper" tier of structural features phi(y), read from CUDA source text (no compiler, no profiler).

Source of every definition: the paper's feature table as fixed in ``shared/design/PAPER-SPEC.md`` section 2
("Structural features phi(y)"). The source is parsed with tree-sitter (CUDA grammar); the facts read from the
tree (:mod:`cudaperf.features._reader`) are turned into the eleven features below by one small function each,
whose docstring gives the formula. Every constant is a field of :class:`PaperFeatureSettings`.

Kernels K(y) are the ``__global__`` function definitions. Per-kernel quantities are read from the kernel's own
body (calls into ``__device__`` functions are not followed).

Never raises on input: a value that cannot be read is NaN, with a reason in :attr:`FeatureVector.reasons`; the
number of ERROR / MISSING nodes in the parse is reported as :attr:`FeatureVector.parse_errors`.

    >>> fv = extract_paper_features(source)
    >>> fv.values["coal"], fv.reasons.get("tpb")
    >>> features_to_json(fv)       # one JSON-ready dict (NaN -> None)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any

from cudaperf.features._reader import KernelFacts, LaunchFacts, SourceFacts, read_source

PAPER_FEATURES: tuple[str, ...] = (
    "coal", "ai", "occ", "div", "xfer", "atomics", "syncthreads", "kernels", "tpb", "gmem_access", "ops",
)
"""The eleven paper features, in the order used for vectors."""

NAN = float("nan")


@dataclass(frozen=True)
class PaperFeatureSettings:
    """Every constant of the paper features (PAPER-SPEC §2; the "Decision" values are the spec's choices).

    Coalescing table, by s = d(index)/d(threadIdx.x) of a global access:
    ``coal_unit`` (s = 1), ``coal_stride2`` (s = 2), ``coal_stride4`` (s = 4), ``coal_wide`` (s > 4),
    ``coal_broadcast`` (s = 0), ``coal_other`` (anything else: s = 3, negative or fractional s, unresolved).

    Arithmetic intensity: ``ai = tanh(ai_lambda * ops / (gmem + ai_eps))``; ``popc_weight`` is the weight of
    one ``__popc``/``__popcll`` call in ``ops``.

    Occupancy bands on threads per block: ``occ_best`` when ``occ_best_low <= tpb <= occ_best_high``;
    ``occ_ok`` when ``occ_ok_low <= tpb < occ_best_low`` or ``occ_best_high < tpb <= occ_ok_high``;
    ``occ_poor`` otherwise.

    Divergence: ``div = -div_alpha * n_divergent_if``.

    Transfers: ``xfer = -xfer_l1 * max(0, N_memcpy - xfer_free_copies) - xfer_l2 * N_memcpy_in_loops
    + xfer_l3 * I_efficient``.

    ``gmem_scope``: which subscripts count as memory accesses in ``gmem_access`` and ``ai``: ``"global"``
    (subscripts on the kernel's pointer parameters and pointers derived from them; default) or ``"all"``
    (every subscript in the kernel body, shared and local arrays included: the spec table's literal wording).
    """

    coal_unit: float = 1.0
    coal_stride2: float = 0.4
    coal_stride4: float = 0.1
    coal_wide: float = -0.5
    coal_broadcast: float = 0.2
    coal_other: float = 0.0
    ai_lambda: float = 0.5
    ai_eps: float = 1.0
    popc_weight: int = 4
    occ_best: float = 1.0
    occ_ok: float = 0.4
    occ_poor: float = -0.3
    occ_best_low: int = 128
    occ_best_high: int = 256
    occ_ok_low: int = 64
    occ_ok_high: int = 512
    div_alpha: float = 1.0
    xfer_l1: float = 1.0
    xfer_l2: float = 1.0
    xfer_l3: float = 1.0
    xfer_free_copies: int = 2
    gmem_scope: str = "global"


DEFAULT_SETTINGS = PaperFeatureSettings()


@dataclass
class FeatureVector:
    """The paper features of one source.

    ``values`` holds all eleven :data:`PAPER_FEATURES` (NaN where unreadable); ``reasons[name]`` says why a value
    is NaN; ``parse_errors`` counts ERROR/MISSING nodes; ``per_kernel`` and ``launches`` are the details the
    aggregates were computed from (JSON-ready dicts).
    """

    values: dict[str, float]
    reasons: dict[str, str] = field(default_factory=dict)
    parse_errors: int = 0
    per_kernel: list[dict[str, Any]] = field(default_factory=list)
    launches: list[dict[str, Any]] = field(default_factory=list)

    def __getitem__(self, name: str) -> float:
        """A feature value, or ``parse_errors`` (as a float) for that name."""
        return float(self.parse_errors) if name == "parse_errors" else self.values[name]

    def as_list(self, names: tuple[str, ...] = PAPER_FEATURES) -> list[float]:
        """The values of ``names`` in order (NaN kept)."""
        return [self[n] for n in names]


Result = tuple[float, str | None]
"""A feature value and, when it is NaN, the reason."""


# ---------------------------------------------------------------------------------------------------- per access
def coal_score(stride: float | None, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> float:
    """The coalescing score of one global access with stride s = d(index)/d(threadIdx.x).

    1.0 if s = 1, 0.4 if s = 2, 0.1 if s = 4, -0.5 if s > 4, 0.2 if s = 0, else 0.0 (``None`` = unresolved =
    "else"). Source: PAPER-SPEC §2, row ``coal``.
    """
    if stride is None:
        return settings.coal_other
    table = {1: settings.coal_unit, 2: settings.coal_stride2, 4: settings.coal_stride4, 0: settings.coal_broadcast}
    if stride in table:
        return table[stride]
    return settings.coal_wide if stride > 4 else settings.coal_other


# ---------------------------------------------------------------------------------------------------- features
def kernel_coal(k: KernelFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> float:
    """Mean :func:`coal_score` over the kernel's global accesses; NaN when it has none."""
    if not k.accesses:
        return NAN
    return fmean(coal_score(a.stride, settings) for a in k.accesses)


def feature_coal(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """coal = mean over kernels k of (mean over global accesses a of k of coal_score(s_a)).

    s_a = d(index_a)/d(threadIdx.x), read symbolically (locals followed, constants folded). Kernels without
    a global access are left out of the mean; NaN when no kernel has one. Source: PAPER-SPEC §2, row ``coal``.
    """
    if not facts.kernels:
        return NAN, _no_kernel_reason(facts)
    scores = [s for k in facts.kernels if not math.isnan(s := kernel_coal(k, settings))]
    if not scores:
        return NAN, "no global array access (subscript on a kernel pointer parameter) in any kernel"
    return fmean(scores), None


def kernel_ops(k: KernelFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> int:
    """n(+) + n(-) + n(*) + n(/) + popc_weight * n(popc) in one kernel body (compound ``+=`` etc. included)."""
    return k.ops + settings.popc_weight * k.popc


def feature_ops(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """ops = sum over kernels of n(+) + n(-) + n(*) + n(/) + 4 * n(__popc).

    Binary ``+ - * /`` and their compound assignments count; unary minus, ``++``/``--`` and ``%`` do not.
    0 without kernels. Source: PAPER-SPEC §2, row ``ops``.
    """
    return float(sum(kernel_ops(k, settings) for k in facts.kernels)), None


def kernel_gmem(k: KernelFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> int:
    """The kernel's memory access count: global subscripts, or every subscript when ``gmem_scope == "all"``."""
    return k.subscripts if settings.gmem_scope == "all" else len(k.accesses)


def feature_gmem_access(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """gmem_access = sum over kernels of the number of array (subscript) accesses in the kernel body.

    By default only accesses to global memory count (see ``PaperFeatureSettings.gmem_scope``); a chain
    ``a[i][j]`` is one access. 0 without kernels. Source: PAPER-SPEC §2, row ``gmem_access``.
    """
    return float(sum(kernel_gmem(k, settings) for k in facts.kernels)), None


def kernel_ai(k: KernelFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> float:
    """tanh(lambda * ops_k / (gmem_k + eps)) for one kernel."""
    return math.tanh(settings.ai_lambda * kernel_ops(k, settings) / (kernel_gmem(k, settings) + settings.ai_eps))


def feature_ai(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """ai = mean over kernels k of tanh(lambda * ops_k / (gmem_k + eps)), lambda = 0.5, eps = 1.

    NaN without kernels. Source: PAPER-SPEC §2, row ``ai``.
    """
    if not facts.kernels:
        return NAN, _no_kernel_reason(facts)
    return fmean(kernel_ai(k, settings) for k in facts.kernels), None


def feature_tpb(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """tpb = threads per block of the launch configuration ``<<<grid, block>>>`` (product of the block dims).

    Several launches: the mean over those whose block size is a compile-time constant (literals, ``dim3``,
    ``#define``, ``const``/``constexpr``, enumerators, simple locals). NaN when there is no launch or none
    resolves. Source: PAPER-SPEC §2, row ``tpb``.
    """
    if not facts.launches:
        return NAN, "no kernel launch (<<<grid, block>>>) in the source"
    sizes = [launch.tpb for launch in facts.launches if launch.tpb is not None]
    if not sizes:
        return NAN, "; ".join(sorted({launch.reason or "?" for launch in facts.launches}))
    return fmean(sizes), None


def occ_score(tpb: float, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> float:
    """1.0 if 128 <= tpb <= 256; 0.4 if 64 <= tpb < 128 or 256 < tpb <= 512; else -0.3 (NaN stays NaN)."""
    s = settings
    if math.isnan(tpb):
        return NAN
    if s.occ_best_low <= tpb <= s.occ_best_high:
        return s.occ_best
    if s.occ_ok_low <= tpb < s.occ_best_low or s.occ_best_high < tpb <= s.occ_ok_high:
        return s.occ_ok
    return s.occ_poor


def feature_occ(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """occ = occ_score(tpb): 1.0 if 128 <= tpb <= 256; 0.4 if 64 <= tpb < 128 or 256 < tpb <= 512; else -0.3.

    NaN when tpb is NaN. Source: PAPER-SPEC §2, row ``occ``.
    """
    tpb, reason = feature_tpb(facts, settings)
    if math.isnan(tpb):
        return NAN, f"tpb unknown: {reason}"
    return occ_score(tpb, settings), None


def feature_div(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """div = -alpha * (number of ``if`` in kernel bodies whose condition depends on threadIdx), alpha = 1.

    Dependence is followed through locals (``int i = ... threadIdx.x ...; if (i < n)`` counts) and through loads
    at thread-varying indices. 0 without kernels. Source: PAPER-SPEC §2, row ``div``.
    """
    return 0.0 - settings.div_alpha * sum(k.divergent_ifs for k in facts.kernels), None


def efficient_transfers(facts: SourceFacts) -> int:
    """I_efficient: 1 when there are no copies, pinned host memory is allocated (cudaMallocHost / cudaHostAlloc /
    cudaHostRegister), or every ``cudaMemcpy*`` call is an ``...Async`` one; else 0."""
    if facts.memcpy == 0 or facts.pinned > 0 or facts.memcpy_async == facts.memcpy:
        return 1
    return 0


def feature_xfer(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """xfer = -l1 * max(0, N_memcpy - 2) - l2 * N_memcpy_in_loops + l3 * I_efficient, l1 = l2 = l3 = 1.

    N_memcpy counts ``cudaMemcpy*`` calls anywhere in the file (2D/3D/ToSymbol/Async included); a call is "in
    a loop" when it is written inside a for/while/do body. Source: PAPER-SPEC §2, row ``xfer``.
    """
    s = settings
    value = (-s.xfer_l1 * max(0, facts.memcpy - s.xfer_free_copies) - s.xfer_l2 * facts.memcpy_in_loops
             + s.xfer_l3 * efficient_transfers(facts))
    return value, None


def feature_atomics(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """atomics = number of ``atomic*`` calls (atomicAdd, atomicCAS, ...) in kernel bodies.

    Source: PAPER-SPEC §2, row ``atomics``.
    """
    return float(sum(k.atomics for k in facts.kernels)), None


def feature_syncthreads(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """syncthreads = number of ``__syncthreads`` (and ``__syncthreads_count/and/or``, ``__syncwarp``) calls.

    Counted in the whole file (device helper functions included), as the spec row does not restrict it to
    kernel bodies; the per-kernel details give the kernel-body counts. Source: PAPER-SPEC §2, row ``syncthreads``.
    """
    return float(facts.syncs), None


def feature_kernels(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> Result:
    """kernels = number of ``__global__`` function definitions (prototypes do not count; none when the source
    ``#define``s ``__global__`` away). Source: PAPER-SPEC §2, row ``kernels``."""
    return float(len(facts.kernels)), None


FEATURE_FUNCTIONS = {
    "coal": feature_coal, "ai": feature_ai, "occ": feature_occ, "div": feature_div, "xfer": feature_xfer,
    "atomics": feature_atomics, "syncthreads": feature_syncthreads, "kernels": feature_kernels,
    "tpb": feature_tpb, "gmem_access": feature_gmem_access, "ops": feature_ops,
}
"""Feature name -> the function computing it from :class:`SourceFacts` (its docstring is the definition)."""


def _no_kernel_reason(facts: SourceFacts) -> str:
    if facts.global_macro:
        return "no __global__ kernel: the source #defines __global__ away"
    if facts.parse_errors:
        return f"no __global__ kernel could be read ({facts.parse_errors} parse errors)"
    return "no __global__ kernel in the source"


# ---------------------------------------------------------------------------------------------------- public API
def features_from_facts(facts: SourceFacts, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> FeatureVector:
    """Turn read facts into a :class:`FeatureVector` (all eleven features, NaN with reasons where unreadable)."""
    values: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for name in PAPER_FEATURES:
        value, reason = FEATURE_FUNCTIONS[name](facts, settings)
        values[name] = float(value)
        if math.isnan(value):
            reasons[name] = reason or "unreadable"
    return FeatureVector(values, reasons, facts.parse_errors, _per_kernel(facts, settings),
                         [_launch_dict(launch) for launch in facts.launches])


def extract_paper_features(source: str, settings: PaperFeatureSettings = DEFAULT_SETTINGS) -> FeatureVector:
    """The paper features of a CUDA source. Never raises: failures become NaN features with reasons."""
    try:
        facts = read_source(source if isinstance(source, (str, bytes)) else str(source))
    except RecursionError:
        return _all_nan("source nested too deeply to read")
    except ImportError as e:
        return _all_nan(f"tree-sitter CUDA parser unavailable: {e}")
    except Exception as e:  # noqa: BLE001 -- the contract is "never crash"; the reason keeps the evidence
        return _all_nan(f"internal error while reading the source: {type(e).__name__}: {e}")
    return features_from_facts(facts, settings)


def features_to_json(fv: FeatureVector) -> dict[str, Any]:
    """One JSON-ready dict: the eleven features at the top level (NaN -> None), plus ``parse_errors``,
    ``reasons`` (feature -> why it is None), ``per_kernel`` and ``launches`` (the details)."""
    out: dict[str, Any] = {name: _json_number(fv.values.get(name, NAN)) for name in PAPER_FEATURES}
    out["parse_errors"] = fv.parse_errors
    out["reasons"] = dict(fv.reasons)
    out["per_kernel"] = [dict(k) for k in fv.per_kernel]
    out["launches"] = [dict(launch) for launch in fv.launches]
    return out


def _json_number(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def _all_nan(reason: str) -> FeatureVector:
    return FeatureVector({n: NAN for n in PAPER_FEATURES}, {n: reason for n in PAPER_FEATURES})


def _per_kernel(facts: SourceFacts, settings: PaperFeatureSettings) -> list[dict[str, Any]]:
    out = []
    for k in facts.kernels:
        coal = kernel_coal(k, settings)
        out.append({
            "name": k.name, "line": k.line, "coal": _json_number(coal), "ops": kernel_ops(k, settings),
            "gmem_access": kernel_gmem(k, settings), "subscripts": k.subscripts,
            "ai": kernel_ai(k, settings), "ifs": k.ifs, "divergent_ifs": k.divergent_ifs,
            "atomics": k.atomics, "syncthreads": k.syncs,
            "accesses": [{**asdict(a), "score": coal_score(a.stride, settings)} for a in k.accesses],
        })
    return out


def _launch_dict(launch: LaunchFacts) -> dict[str, Any]:
    return asdict(launch)
