"""CuSeT, CUDA-Sensitive Instruction Tuning ("From Tokens to Regions", arXiv 2606.16231), as an SFT loss.

What the paper says (its abstract, the only part of it this project has): CUDA sensitivity, "code tokens or regions
tightly coupled with execution constraints", shows at two levels: most CUDA-sensitive tokens are predicted with
high confidence, while a smaller low-confidence subset forms *regions* that correspond to execution-critical
structures. So training should both leverage the high-confidence CUDA-sensitive tokens and preserve the
low-confidence CUDA-sensitive regions. CuSeT does this inside plain SFT by combining **adaptive token-level
masking** with **region-aware sample reweighting** ("from tokens to regions").

Everything else below is this project's reading, each number a field of :class:`CuSeTSettings`:

* **Which tokens are CUDA-sensitive**: the classes of :mod:`cudaperf.train.sensitive` (index and bound
  computations, launch configuration, ``__shared__``, barriers and warp intrinsics, atomics, device memory calls),
  read from the tree-sitter parse of the answer's code and mapped to tokens through the fast tokenizer's offsets.
* **Confidence** of a token: the probability the policy gives the target token, ``exp(log p)``, from the same
  forward pass as the loss and detached (no gradient flows through the mask or the weights).
* **Adaptive token-level masking**: a completion token whose confidence is ``>= mask_confidence`` and that is
  *not* CUDA-sensitive is left out of the loss. "Adaptive" is read as: the mask follows the model, recomputed at
  every step from its current confidence (what the model has learnt stops costing gradient), rather than a fixed
  list of tokens. CUDA-sensitive tokens are never masked, however confident (the "leverage" half).
* **Region-aware sample reweighting**: a *region* is a run of at least ``min_region_tokens`` consecutive
  completion tokens that are all CUDA-sensitive and all below ``region_confidence``. A sample's weight is
  ``min(1 + region_alpha * f, max_sample_weight)`` where ``f`` is the fraction of its CUDA-sensitive tokens that
  lie in regions (0 when it has none: weight 1). The weight multiplies every kept token of the sample.
* **Normalisation**: the weighted, masked token losses are summed and divided by the number of completion tokens
  in the (accumulated) batch, the same denominator TRL's plain loss uses (``num_items_in_batch``). Masking and
  weighting change each token's share, not the scale of a batch that has nothing masked and no region.

Logged each logging step (TRL averages them): ``cuset/masked_fraction`` (completion tokens masked),
``cuset/sensitive_fraction``, ``cuset/region_fraction`` (sensitive tokens in regions),
``cuset/mean_sample_weight`` and ``cuset/weighted_sample_fraction`` (samples with weight > 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
from trl import SFTTrainer

from cudaperf.train.sensitive import SENSITIVE_CLASSES, merge_spans, token_sensitivity

SENSITIVE_COLUMN = "cuda_sensitive"
"""The per-token 0/1 column the trainer adds to the tokenized dataset (aligned with ``input_ids``)."""
SPANS_COLUMN = "sensitive_spans"
"""The column of the training examples that holds the answer's sensitive ``[start, end)`` character ranges,
relative to the answer text (the assistant message's content)."""


@dataclass(frozen=True)
class CuSeTSettings:
    mask_confidence: float = 0.9
    """Token-level: a completion token that is not CUDA-sensitive and has p(target) >= this is out of the loss."""
    region_confidence: float = 0.5
    """Region-level: a CUDA-sensitive token with p(target) below this is low-confidence."""
    min_region_tokens: int = 3
    """Region-level: a region is at least this many consecutive low-confidence CUDA-sensitive tokens."""
    region_alpha: float = 1.0
    """A sample's weight is 1 + region_alpha x (fraction of its sensitive tokens in regions), capped."""
    max_sample_weight: float = 2.0
    """The cap on a sample's weight."""
    classes: tuple[str, ...] = SENSITIVE_CLASSES
    """The CUDA-sensitive classes (:data:`cudaperf.train.sensitive.SENSITIVE_CLASSES`) that count."""

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_confidence <= 1.0:
            raise ValueError("mask_confidence must be in (0, 1] (1: mask only tokens predicted with certainty)")
        if not 0.0 <= self.region_confidence <= 1.0:
            raise ValueError("region_confidence must be in [0, 1]")
        if self.min_region_tokens < 1:
            raise ValueError("min_region_tokens must be >= 1")
        if self.region_alpha < 0:
            raise ValueError("region_alpha must be >= 0")
        if self.max_sample_weight < 1.0:
            raise ValueError("max_sample_weight must be >= 1")
        unknown = sorted(set(self.classes) - set(SENSITIVE_CLASSES))
        if unknown or not self.classes:
            raise ValueError(f"classes must be a non-empty subset of {', '.join(SENSITIVE_CLASSES)}; "
                             f"unknown: {unknown}")


@dataclass(frozen=True)
class CuSeTLoss:
    """One batch's CuSeT loss and what went into it (every tensor but ``loss`` detached)."""

    loss: torch.Tensor
    keep_BT: torch.Tensor
    """Tokens in the loss (completion tokens less the masked ones)."""
    masked_BT: torch.Tensor
    """Completion tokens masked (confident and not CUDA-sensitive)."""
    region_BT: torch.Tensor
    """CUDA-sensitive tokens inside a low-confidence region."""
    weight_B: torch.Tensor
    """Each sample's weight."""
    n_valid: torch.Tensor
    n_sensitive: torch.Tensor

    def stats(self) -> dict[str, float]:
        n_valid = max(1.0, float(self.n_valid))
        n_sens = float(self.n_sensitive)
        has_tokens = (self.keep_BT | self.masked_BT).any(dim=1)
        w = self.weight_B[has_tokens]
        return {"cuset/masked_fraction": float(self.masked_BT.sum()) / n_valid,
                "cuset/sensitive_fraction": n_sens / n_valid,
                "cuset/region_fraction": float(self.region_BT.sum()) / n_sens if n_sens else 0.0,
                "cuset/mean_sample_weight": float(w.mean()) if w.numel() else 1.0,
                "cuset/weighted_sample_fraction": float((w > 1.0).float().mean()) if w.numel() else 0.0}


def region_mask(low_BT: torch.Tensor, min_tokens: int) -> torch.Tensor:
    """The positions of ``low_BT`` (bool, (B, T)) that belong to a run of at least ``min_tokens`` consecutive True."""
    B, T = low_BT.shape
    run_id_BT = torch.cumsum((~low_BT).to(torch.int64), dim=1)  # constant along a run of True
    flat_BT = run_id_BT + torch.arange(B, device=low_BT.device)[:, None] * (T + 1)
    counts = torch.zeros(B * (T + 1), dtype=torch.int64, device=low_BT.device)
    counts.scatter_add_(0, flat_BT[low_BT], torch.ones_like(flat_BT[low_BT]))
    return low_BT & (counts[flat_BT] >= min_tokens)


def cuset_loss(log_probs_BT: torch.Tensor, label_mask_BT: torch.Tensor, sensitive_BT: torch.Tensor,
               settings: CuSeTSettings = CuSeTSettings(), num_items_in_batch: Any = None) -> CuSeTLoss:
    """CuSeT's loss for one micro-batch (see the module docstring).

    ``log_probs_BT``: log p(target) per position, 0 where there is no target (TRL's fused LM head gives it so);
    ``label_mask_BT``: the completion positions; ``sensitive_BT``: 1 where the target token is CUDA-sensitive, all
    three aligned on the *target* token. ``num_items_in_batch``: the completion tokens of the whole accumulated
    batch (the denominator); None: this micro-batch's."""
    s = settings
    valid = label_mask_BT.bool()
    conf = log_probs_BT.detach().float().exp()
    sens = sensitive_BT.bool() & valid
    masked = valid & ~sens & (conf >= s.mask_confidence)
    keep = valid & ~masked
    region = region_mask(sens & (conf < s.region_confidence), s.min_region_tokens)
    n_sens_B = sens.sum(dim=1)
    frac_B = region.sum(dim=1).float() / n_sens_B.clamp(min=1).float()
    weight_B = torch.clamp(1.0 + s.region_alpha * frac_B, max=s.max_sample_weight)
    per_token = -log_probs_BT * keep.to(log_probs_BT.dtype) * weight_B.to(log_probs_BT.dtype)[:, None]
    denom = valid.sum() if num_items_in_batch is None else num_items_in_batch
    loss = per_token.sum() / torch.as_tensor(denom, device=per_token.device).clamp(min=1)
    return CuSeTLoss(loss=loss, keep_BT=keep, masked_BT=masked, region_BT=region, weight_B=weight_B.detach(),
                     n_valid=valid.sum(), n_sensitive=sens.sum())


# --------------------------------------------------------------------------------------------------- data

def sensitivity_for_row(tokenizer: Any, prompt: Sequence[Mapping[str, str]], completion: Sequence[Mapping[str, str]],
                        spans: Sequence[Sequence[int]], input_ids: Sequence[int],
                        chat_template: str | None = None) -> list[int] | None:
    """0/1 per token of ``input_ids`` (TRL's tokenization of prompt + completion): 1 where the token overlaps one
    of the answer's sensitive ``spans`` (characters of the answer text). None when the chat text cannot be lined
    up with ``input_ids`` (a tokenizer whose template tokenization differs from tokenizing the rendered text)."""
    text = tokenizer.apply_chat_template(list(prompt) + list(completion), tokenize=False, chat_template=chat_template)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(input_ids)
    if list(enc["input_ids"][:len(ids)]) != ids:
        return None
    answer = completion[-1]["content"]
    pos = text.rfind(answer)
    if pos < 0:
        return None
    return token_sensitivity(enc["offset_mapping"][:len(ids)], merge_spans([tuple(s) for s in spans]),
                             shift_chars=pos)


class SensitivityCollator:
    """TRL's collator, with the ``cuda_sensitive`` column padded alongside (0 on padding)."""

    def __init__(self, inner: Any, pad_to_multiple_of: int | None = None) -> None:
        self.inner = inner
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        rows = [list(e[SENSITIVE_COLUMN]) for e in examples]
        batch = self.inner([{k: v for k, v in e.items() if k != SENSITIVE_COLUMN} for e in examples])
        width = batch["input_ids"].shape[1]
        out = torch.zeros((len(rows), width), dtype=torch.int8)
        for i, r in enumerate(rows):
            out[i, :min(width, len(r))] = torch.tensor(r[:width], dtype=torch.int8)
        batch[SENSITIVE_COLUMN] = out
        return batch


# --------------------------------------------------------------------------------------------------- trainer

class CuSeTTrainer(SFTTrainer):
    """TRL's SFTTrainer with CuSeT's loss in training (evaluation keeps TRL's plain loss).

    The training dataset must be conversational prompt-completion with a ``sensitive_spans`` column (as
    :func:`cudaperf.train.sft.to_hf_dataset` writes it); the trainer adds ``cuda_sensitive`` after TRL's own
    tokenization and truncation. Packing and padding-free batches are refused (the per-token column would not
    follow them)."""

    def __init__(self, *args: Any, cuset: CuSeTSettings = CuSeTSettings(), **kwargs: Any) -> None:
        self.cuset = cuset
        self.cuset_alignment_failures = 0
        targs = kwargs.get("args")
        if targs is not None and (getattr(targs, "packing", False) or getattr(targs, "padding_free", False)):
            raise ValueError("CuSeT does not support packing or padding-free batches")
        super().__init__(*args, **kwargs)
        pc = self.accelerator.parallelism_config
        if pc is not None and (getattr(pc, "cp_enabled", False) or getattr(pc, "sp_enabled", False)):
            raise ValueError("CuSeT does not support context or sequence parallelism")
        self.data_collator = SensitivityCollator(self.data_collator)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if SENSITIVE_COLUMN not in self._signature_columns:
            self._signature_columns = list(self._signature_columns) + [SENSITIVE_COLUMN]

    def _prepare_dataset(self, dataset, processing_class, args, packing, formatting_func, dataset_name):
        dataset = super()._prepare_dataset(dataset, processing_class, args, packing, formatting_func, dataset_name)
        if dataset_name != "train":
            return dataset
        cols = set(dataset.column_names or [])
        if not {"prompt", "completion", SPANS_COLUMN} <= cols:
            raise ValueError(f"CuSeT needs a prompt-completion dataset with a {SPANS_COLUMN!r} column "
                             f"(it has {sorted(cols)})")
        tok = getattr(processing_class, "tokenizer", processing_class)
        if not getattr(tok, "is_fast", False):
            raise ValueError("CuSeT maps code to tokens with the tokenizer's offsets: it needs a fast tokenizer")
        template = self.chat_template

        def add(example):
            sens = sensitivity_for_row(tok, example["prompt"], example["completion"], example[SPANS_COLUMN],
                                       example["input_ids"], chat_template=template)
            return {SENSITIVE_COLUMN: sens if sens is not None else [0] * len(example["input_ids"]),
                    "cuda_aligned": sens is not None}

        dataset = dataset.map(add, desc="Marking CUDA-sensitive tokens")
        self.cuset_alignment_failures = sum(1 for a in dataset["cuda_aligned"] if not a)
        return dataset

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        sensitive = inputs.pop(SENSITIVE_COLUMN, None)
        if sensitive is None or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        inputs["use_cache"] = False
        if self.aux_loss_enabled:
            inputs["output_router_logits"] = True
        outputs = model(**inputs, fused_lm_head=True)
        # log_probs[:, t] scores the label at t + 1: align the per-token column on the target token
        result = cuset_loss(outputs.log_probs, outputs.label_mask, sensitive[:, 1:].to(outputs.log_probs.device),
                            self.cuset, num_items_in_batch)
        loss = result.loss
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        if self.aux_loss_enabled:
            steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
            loss = loss + self.router_aux_loss_coef * outputs.aux_loss / steps

        metrics = self._metrics["train"]
        num_valid = self.accelerator.gather_for_metrics(outputs.label_mask.sum()).sum()
        entropy_sum = self.accelerator.gather_for_metrics(outputs.entropy.detach().sum()).sum()
        num_correct = self.accelerator.gather_for_metrics(outputs.is_top1.sum()).sum()
        metrics["entropy"].append((entropy_sum / num_valid).item() if num_valid > 0 else 0.0)
        metrics["mean_token_accuracy"].append((num_correct / num_valid).item() if num_valid > 0 else 0.0)
        if "attention_mask" in inputs:
            n_tokens = self.accelerator.gather_for_metrics(inputs["attention_mask"].sum()).sum().item()
            self._total_train_tokens += n_tokens // self._tp_size
        metrics["num_tokens"] = [self._total_train_tokens]
        for key, value in result.stats().items():
            metrics[key].append(value)
        return (loss, outputs) if return_outputs else loss
