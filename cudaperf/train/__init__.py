"""Training: the supervised warm start (:mod:`cudaperf.train.sft`, ``cudaperf sft``) with the plain SFT loss or
CuSeT's (:mod:`cudaperf.train.cuset`), and the CUDA-sensitive token classes CuSeT uses
(:mod:`cudaperf.train.sensitive`).

Names are re-exported lazily: importing this package does not import torch or TRL.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "SENSITIVE_CLASSES": "sensitive", "SensitiveSpan": "sensitive", "cuda_sensitive_spans": "sensitive",
    "merge_spans": "sensitive", "token_sensitivity": "sensitive",
    "CuSeTSettings": "cuset", "CuSeTTrainer": "cuset", "cuset_loss": "cuset",
    "SFTDataSettings": "sft", "SFTTrainSettings": "sft", "SFTEvalSettings": "sft", "LoRASettings": "sft",
    "SFTExample": "sft", "ExampleSet": "sft", "SFTResult": "sft", "SFTRunError": "sft", "TrainingDataError": "sft",
    "build_examples": "sft", "run_sft": "sft", "evaluate_adapter": "sft", "to_hf_dataset": "sft",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = sorted(_EXPORTS)
