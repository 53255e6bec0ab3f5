"""The reward functions inside real trainers on the CPU: TRL's GRPOTrainer with a tiny randomly initialised
Llama (built here, nothing downloaded), and the dataset read back with `datasets`."""

from __future__ import annotations

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")


def _tiny_model_and_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(["<pad>", "<s>", "</s>"] + [chr(c) for c in range(32, 127)] + ["\n"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg), hf


@pytest.mark.slow  # 49 s on two cores; tests/test_grpo.py trains GRPO end to end in the default run
def test_grpo_step_with_cudaperf_rewards(tmp_path):
    from datasets import Dataset as HFDataset
    from trl import GRPOConfig, GRPOTrainer

    from cudaperf.features.normalizer import FeatureNormalizer
    from cudaperf.features.paper import PAPER_FEATURES, extract_paper_features
    from cudaperf.reward.adapters import HarnessRewards
    from cudaperf.reward.composite import RewardSettings
    from cudaperf.reward.terms import linear_structural
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    tasks = load_builtin_tasks()
    norm = FeatureNormalizer(PAPER_FEATURES).fit([extract_paper_features(c.source) for c in builtin_candidates()
                                                  if c.task_id in {t.id for t in tasks}])
    rewards = HarnessRewards([find_task(tasks, "saxpy")], settings=RewardSettings("paper"),
                             structural=linear_structural({"coal": 1.0, "occ": 0.5}, norm))
    model, tok = _tiny_model_and_tokenizer()
    ds = HFDataset.from_dict({"prompt": ["Translate to CUDA: for (i = 0; i < n; i++) y[i] += a * x[i];"] * 4,
                              "task_id": ["saxpy"] * 4})
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=16, max_steps=1, logging_steps=1, report_to=[], use_cpu=True,
                      bf16=False, save_strategy="no")
    trainer = GRPOTrainer(model=model, reward_funcs=rewards.functions(), args=args, train_dataset=ds,
                          processing_class=tok)
    trainer.train()
    logged = {k: v for row in trainer.state.log_history for k, v in row.items()}
    # a random model writes no code: R_ver = -alpha_comp for every completion, and R_str has no code to score
    assert float(logged["rewards/cudaperf_ver/mean"]) == -3.0
    assert rewards.log and all(b["task_id"] == "saxpy" and b["r_ver"] == -3.0 for b in rewards.log)
    assert 1 <= rewards.evaluations <= 4  # one harness evaluation per distinct completion, shared by both terms


def test_dataset_reads_with_datasets():
    from datasets import load_dataset

    from cudaperf.dataset.store import default_dataset_dir

    root = default_dataset_dir()
    d = {k: load_dataset("parquet", data_files=str(root / f"{k}.parquet"), split="train")
         for k in ("tasks", "candidates", "measurements")}
    assert d["tasks"].num_rows >= 500 and d["candidates"].num_rows >= 3000
    assert {"candidate_id", "tags", "code"} <= set(d["candidates"].column_names)
