"""Helpers the trainers share (``cudaperf sft`` and ``cudaperf train``): the model directory, checkpoints, the run
record's JSON, package versions, the time budget, TensorBoard and the LoRA config."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from transformers import TrainerCallback


class TrainRunError(ValueError):
    """The output directory, the model or the settings do not allow the run (the message says what to change)."""


def resolve_model_dir(model: str | Path, error: type[Exception] = TrainRunError) -> Path:
    """``embedded`` -> the embedded model's transformers directory (converted from its GGUF the first time);
    otherwise a local model directory, checked. Raises ``error`` with what is missing."""
    from cudaperf.policy.base import PolicyError
    from cudaperf.policy.hf import check_model_dir

    try:
        if str(model) == "embedded":
            from cudaperf.policy.embedded import embedded_model_dir

            return embedded_model_dir()[0]
        return check_model_dir(model)
    except PolicyError as exc:
        raise error(str(exc)) from None


def last_checkpoint(ckpt_dir: Path) -> Path | None:
    """The ``checkpoint-N`` directory with the highest N (None: none)."""
    found = [p for p in ckpt_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None


def clean_json(obj: Any) -> Any:
    """JSON-safe: non-finite floats become None (a NaN loss is recorded as null, not as invalid JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def write_json(path: Path, obj: Mapping[str, Any]) -> None:
    """Write atomically (a temporary file, then a rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(clean_json(obj), indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in ("cudaperf", "torch", "transformers", "trl", "peft", "datasets", "accelerate", "bitsandbytes"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def finite(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class TimeBudget(TrainerCallback):
    """Ends training (saving a checkpoint) after the optimizer step that passes ``minutes`` of training."""

    def __init__(self, minutes: float | None) -> None:
        self.minutes = minutes
        self.stopped = False
        self._t0 = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self._t0 = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if self.minutes is not None and time.monotonic() - self._t0 > 60 * self.minutes:
            self.stopped = True
            control.should_training_stop = True
            control.should_save = True
        return control


def tensorboard_callbacks(tb_dir: Path, log: Callable[[str], None], record_hint: str) -> list[Any]:
    """A TensorBoard callback writing to ``tb_dir`` when tensorboard is installed (else none, said through ``log``;
    ``record_hint`` names where the losses are kept instead)."""
    callbacks: list[Any] = []
    try:
        from transformers.integrations import TensorBoardCallback, is_tensorboard_available
    except ImportError:  # pragma: no cover
        is_tensorboard_available = lambda: False  # noqa: E731
    if is_tensorboard_available():
        try:
            from torch.utils.tensorboard import SummaryWriter

            callbacks.append(TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(tb_dir))))
        except Exception as exc:  # a broken tensorboard install must not stop the training
            log(f"TensorBoard logs off: {type(exc).__name__}: {exc}")
    else:
        log(f"tensorboard is not installed: no TensorBoard logs (pip install tensorboard); {record_hint}")
    return callbacks


def lora_config(r: int, alpha: int, dropout: float, target_modules: str):
    """peft's LoraConfig for a causal LM: ``all-linear`` or comma-separated module names."""
    from peft import LoraConfig

    targets: Any = target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, task_type="CAUSAL_LM")


def check_qlora(use_cuda: bool, error: type[Exception] = TrainRunError) -> None:
    """QLoRA needs a CUDA GPU and bitsandbytes: raise ``error`` saying which is missing."""
    import importlib.util

    if not use_cuda:
        raise error("--qlora needs a CUDA GPU (bitsandbytes 4-bit); none is visible: drop --qlora for LoRA on the "
                    "full-precision model")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise error("--qlora needs bitsandbytes: pip install bitsandbytes (or drop --qlora)")


def bnb_4bit_config(bf16: bool):
    """NF4 with double quantization, bf16 compute where the GPU has it (fp16 otherwise)."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float16)
