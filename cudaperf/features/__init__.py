"""Structural features of CUDA sources for ranking candidates.

The "paper" tier (:mod:`cudaperf.features.paper`) reads the eleven features of PAPER-SPEC §2 from the source text
with a real parser (tree-sitter, CUDA grammar); :mod:`cudaperf.features.normalizer` z-scores them with the
training split's statistics.
"""

from cudaperf.features.normalizer import FeatureNormalizer
from cudaperf.features.paper import (
    PAPER_FEATURES,
    FeatureVector,
    PaperFeatureSettings,
    extract_paper_features,
    features_to_json,
)

__all__ = [
    "PAPER_FEATURES",
    "FeatureNormalizer",
    "FeatureVector",
    "PaperFeatureSettings",
    "extract_paper_features",
    "features_to_json",
]
