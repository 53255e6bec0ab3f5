"""Z-score normalisation of feature vectors with the training split's statistics (PAPER-SPEC §2, last paragraph).

``FeatureNormalizer().fit(train_vectors)`` stores, per feature, the mean and the (population) standard deviation
of the finite training values; ``transform`` maps a vector to ``(x - mean) / std``.

Missing values: NaN is ignored when fitting, and a NaN input becomes 0.0 *after* normalisation, i.e. it is
treated as the training mean (a neutral value for the ranker). A feature with no finite training value gets
mean 0 and std 1. The std has a floor of :data:`STD_FLOOR` so constant features do not divide by zero.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cudaperf.features.paper import PAPER_FEATURES, FeatureVector

STD_FLOOR = 1e-6
DEFAULT_NAMES: tuple[str, ...] = PAPER_FEATURES + ("parse_errors",)
"""The eleven paper features plus ``parse_errors`` (the spec's "own signal")."""
_FORMAT = "cudaperf.features.normalizer/1"

VectorLike = FeatureVector | Mapping[str, Any]
"""A :class:`FeatureVector`, or a mapping such as :func:`features_to_json`'s output (None read as NaN)."""


def _value(v: VectorLike, name: str) -> float:
    """One feature of a vector as a float (NaN when absent or None)."""
    if isinstance(v, FeatureVector):
        x: Any = v[name] if (name in v.values or name == "parse_errors") else None
    else:
        x = v.get(name)
    try:
        return float("nan") if x is None else float(x)
    except (TypeError, ValueError):
        return float("nan")


class FeatureNormalizer:
    """Per-feature z-scoring fitted on a training split; NaN -> 0 (the mean) after normalisation."""

    def __init__(self, names: Iterable[str] = DEFAULT_NAMES) -> None:
        self.names: tuple[str, ...] = tuple(names)
        self.mean: dict[str, float] = {}
        self.std: dict[str, float] = {}
        self.count: dict[str, int] = {}

    @property
    def fitted(self) -> bool:
        """Whether :meth:`fit` (or :meth:`load`) has set the statistics."""
        return bool(self.mean)

    def fit(self, vectors: Iterable[VectorLike]) -> FeatureNormalizer:
        """Set each feature's mean and population std from the finite values of ``vectors``; returns self."""
        columns: dict[str, list[float]] = {n: [] for n in self.names}
        for v in vectors:
            for n in self.names:
                x = _value(v, n)
                if math.isfinite(x):
                    columns[n].append(x)
        for n, xs in columns.items():
            self.count[n] = len(xs)
            if not xs:
                self.mean[n], self.std[n] = 0.0, 1.0
                continue
            m = sum(xs) / len(xs)
            var = sum((x - m) ** 2 for x in xs) / len(xs)
            self.mean[n], self.std[n] = m, max(math.sqrt(var), STD_FLOOR)
        return self

    def transform(self, vector: VectorLike) -> dict[str, float]:
        """``{name: (x - mean) / std}``; a NaN (or missing) x gives 0.0, the training mean."""
        if not self.fitted:
            raise RuntimeError("FeatureNormalizer.transform before fit/load")
        out = {}
        for n in self.names:
            x = _value(vector, n)
            out[n] = (x - self.mean[n]) / self.std[n] if math.isfinite(x) else 0.0
        return out

    def transform_many(self, vectors: Iterable[VectorLike]) -> list[list[float]]:
        """Rows of z-scores in :attr:`names` order (ready for ``numpy.asarray``)."""
        return [[z[n] for n in self.names] for z in map(self.transform, vectors)]

    def to_dict(self) -> dict[str, Any]:
        """The fitted state as JSON-ready data."""
        return {"format": _FORMAT, "names": list(self.names), "mean": self.mean, "std": self.std,
                "count": self.count, "std_floor": STD_FLOOR}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureNormalizer:
        """A normaliser from :meth:`to_dict` data."""
        if data.get("format") != _FORMAT:
            raise ValueError(f"not a feature normaliser file (format {data.get('format')!r})")
        norm = cls(data["names"])
        norm.mean = {n: float(data["mean"][n]) for n in norm.names}
        norm.std = {n: max(float(data["std"][n]), STD_FLOOR) for n in norm.names}
        norm.count = {n: int(data.get("count", {}).get(n, 0)) for n in norm.names}
        return norm

    def save(self, path: str | Path) -> None:
        """Write the fitted state to ``path`` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> FeatureNormalizer:
        """Read a normaliser written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))
