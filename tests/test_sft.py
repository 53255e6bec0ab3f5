"""cudaperf sft on the CPU: the examples (training split only, correct variants only, eval's prompt), the
CUDA-sensitive token classes with the embedded model's tokenizer, CuSeT's loss on a hand-made batch, and
``cudaperf sft`` end to end with each objective on a random-weight Llama (built here, nothing downloaded): the
adapter loads as ``hf:BASE+ADAPTER`` and a run resumes from its checkpoint."""

from __future__ import annotations

import json
import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("datasets")

from conftest import HAVE_GPU  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cudaperf.cli import app  # noqa: E402
from cudaperf.dataset.measure import candidate_summary  # noqa: E402
from cudaperf.dataset.store import Dataset, default_dataset_dir  # noqa: E402
from cudaperf.harness.extract import extract_code  # noqa: E402
from cudaperf.train.cuset import CuSeTSettings, cuset_loss, region_mask  # noqa: E402
from cudaperf.train.sensitive import cuda_sensitive_spans, merge_spans, token_sensitivity  # noqa: E402
from cudaperf.train.sft import (SFTDataSettings, SFTExample, TrainingDataError, build_examples,  # noqa: E402
                                check_training_only)

runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def dataset():
    return Dataset.load(default_dataset_dir())


@pytest.fixture(scope="module")
def embedded_tokenizer():
    """SmolLM2-135M-Instruct's tokenizer: from the converted cache when there is one, else read from the GGUF
    (about 15 s; the model itself is not converted)."""
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    from cudaperf.policy.base import PolicyError
    from cudaperf.policy.embedded import HASH_PREFIX, cache_root, file_sha256, find_gguf

    try:
        gguf = find_gguf()
    except PolicyError as exc:
        pytest.skip(str(exc))
    cached = cache_root() / "embedded" / file_sha256(gguf)[:HASH_PREFIX]
    if (cached / "source.json").is_file():
        tok = AutoTokenizer.from_pretrained(cached)
    else:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    assert tok.is_fast and tok.chat_template
    return tok


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, embedded_tokenizer):
    """A 2-layer Llama with random weights and the embedded model's tokenizer, saved as save_pretrained does."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny_sft_model")
    tok = embedded_tokenizer
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


# --------------------------------------------------------------------------------------------------- examples

def test_examples_are_training_tasks_fastest_correct_variants_with_evals_prompt(dataset):
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.env.prompt import FewShotPool, build_messages

    es = build_examples(SFTDataSettings(variants_per_task=2, seed=0), dataset=dataset)
    rows = {t["id"]: t for t in dataset.tasks}
    summary = candidate_summary(dataset)
    assert es.counts["examples"] == len(es.examples) > 100
    per_task: dict[str, list[SFTExample]] = {}
    for e in es.examples:
        assert rows[e.task_id]["split_task"] == "train" and rows[e.task_id]["split_family"] == "train"
        assert all(rows[t]["split_task"] == "train" and rows[t]["split_family"] == "train"
                   for t in e.fewshot_task_ids)
        assert summary[e.candidate_id]["valid"] and e.speedup >= 1.0
        assert extract_code(e.answer).code == e.code.strip("\n") + "\n"  # the answer reads back to the variant
        per_task.setdefault(e.task_id, []).append(e)
    # the two fastest correct variants of a task, nothing slower
    tid, exs = next((t, v) for t, v in sorted(per_task.items()) if len(v) == 2)
    valid = sorted((summary[c["candidate_id"]]["speedup"], c["candidate_id"]) for c in dataset.candidates
                   if c["task_id"] == tid and summary[c["candidate_id"]]["valid"])
    assert {e.candidate_id for e in exs} == {cid for _, cid in valid[-2:]}
    # the prompt is the one cudaperf eval builds at the first turn (same few-shot draw for the seed)
    e = exs[0]
    task = dataset_tasks(dataset)[tid]
    assert e.prompt == build_messages(task, FewShotPool().examples(task, 0))
    assert len(e.fewshot_task_ids) == 5
    # deterministic for a seed, another order for another seed
    again = build_examples(SFTDataSettings(variants_per_task=2, seed=0, fewshot=False, max_examples=20),
                           dataset=dataset)
    same = build_examples(SFTDataSettings(variants_per_task=2, seed=0, fewshot=False, max_examples=20),
                          dataset=dataset)
    other = build_examples(SFTDataSettings(variants_per_task=2, seed=1, fewshot=False, max_examples=20),
                           dataset=dataset)
    assert again.sha256 == same.sha256 != other.sha256
    assert all(len(x.prompt) == 1 and "[FEWSHOT]" not in x.prompt[0]["content"] for x in again.examples)


def test_a_variant_that_is_not_correct_is_never_an_answer(dataset):
    summary = candidate_summary(dataset)
    es = build_examples(SFTDataSettings(variants_per_task=1, fewshot=False), dataset=dataset)
    victim = es.examples[0].candidate_id  # the fastest correct variant of its task
    broken = Dataset(dataset.root, dataset.tasks, dataset.candidates,
                     [{**m, "correct": False} if m["candidate_id"] == victim else m for m in dataset.measurements],
                     dataset.manifest)
    broken_summary = candidate_summary(broken)
    assert not broken_summary[victim]["valid"] and summary[victim]["valid"]
    after = build_examples(SFTDataSettings(variants_per_task=1, fewshot=False), dataset=broken)
    ids = {e.candidate_id for e in after.examples}
    assert victim not in ids
    assert all(broken_summary[e.candidate_id]["valid"] for e in after.examples)
    # min_speedup leaves out slow correct variants too
    fast = build_examples(SFTDataSettings(variants_per_task=3, min_speedup=5.0, fewshot=False), dataset=dataset)
    assert all(e.speedup >= 5.0 for e in fast.examples)


def test_the_training_only_check_refuses_a_held_out_task(dataset):
    test_task = next(t for t in dataset.tasks if t["split_task"] == "test")
    family_task = next(t for t in dataset.tasks if t["split_task"] == "train" and t["split_family"] == "test")
    cand = next(c for c in dataset.candidates if c["task_id"] == test_task["id"])
    bad = SFTExample(test_task["id"], cand["candidate_id"], 2.0, ({"role": "user", "content": "x"},), "a", "a", ())
    with pytest.raises(TrainingDataError, match="not a training task"):
        check_training_only([bad], dataset)
    es = build_examples(SFTDataSettings(fewshot=False, max_examples=1), dataset=dataset)
    leak = SFTExample(**{**es.examples[0].__dict__, "fewshot_task_ids": (family_task["id"],)})
    with pytest.raises(TrainingDataError, match="split_family=test"):
        check_training_only([leak], dataset)
    with pytest.raises(ValueError, match="kinds"):
        SFTDataSettings(kinds="fortran")


# --------------------------------------------------------------------------------------------------- sensitivity

KERNEL = """__global__ void k(const float* x, float* out, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float scale = 2.0f;
    if (i < n) tile[threadIdx.x] = x[i] * scale;
    __syncthreads();
    if (i < n) atomicAdd(out, tile[threadIdx.x]);
}
void run(const float* x, float* out, int n) {
    float total = 0.5f;
    k<<<(n + 255) / 256, 256>>>(x, out, n);
}
"""


def test_spans_cover_the_cuda_sensitive_constructs_only():
    spans = cuda_sensitive_spans(KERNEL)
    by_cls = {}
    for s in spans:
        by_cls.setdefault(s.cls, []).append(KERNEL[s.start_char:s.end_char])
    assert "__shared__ float tile[256];" in by_cls["shared"]
    assert "i = blockIdx.x * blockDim.x + threadIdx.x" in by_cls["index"]
    assert "[threadIdx.x]" in by_cls["index"] and "[i]" in by_cls["index"]
    assert by_cls["bound"] == ["i < n", "i < n"]
    assert by_cls["sync"] == ["__syncthreads()"]
    assert by_cls["atomic"] == ["atomicAdd(out, tile[threadIdx.x])"]
    assert by_cls["launch"] == ["<<<(n + 255) / 256, 256>>>"]
    covered = merge_spans(spans)
    for plain in ("float scale = 2.0f;", "float total = 0.5f;", "void run("):
        a = KERNEL.index(plain)
        assert not any(s < a + len(plain) and e > a for s, e in covered), plain
    only = cuda_sensitive_spans(KERNEL, classes=("sync",))
    assert [s.cls for s in only] == ["sync"]
    with pytest.raises(ValueError, match="unknown"):
        cuda_sensitive_spans(KERNEL, classes=("bogus",))


def test_token_mapper_marks_sensitive_tokens_of_the_embedded_tokenizer(embedded_tokenizer):
    tok = embedded_tokenizer
    prefix = "<OUTPUT_CUDA>\n"
    text = prefix + KERNEL
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    marks = token_sensitivity(enc["offset_mapping"], merge_spans(cuda_sensitive_spans(KERNEL)),
                              shift_chars=len(prefix))
    assert len(marks) == len(enc["input_ids"])
    pieces = [(text[s:e], m) for (s, e), m in zip(enc["offset_mapping"], marks)]
    marked = "".join(p for p, m in pieces if m)
    for needle in ("threadIdx", "blockIdx", "<<<", ">>>", "__syncthreads", "atomicAdd", "__shared__", "i < n"):
        assert needle.replace(" ", "") in marked.replace(" ", ""), needle
    plain = {p.strip() for p, m in pieces if not m}
    assert {"scale", "total", "OUTPUT", "run", "0.5f"} & plain  # plain code and the tag stay unmarked
    for p, m in pieces:
        if p.strip() in ("scale", "total", "run", "OUTPUT"):
            assert m == 0, p


# --------------------------------------------------------------------------------------------------- the loss

def test_cuset_loss_masks_confident_plain_tokens_and_weights_low_confidence_regions():
    nan = float("nan")
    # row 0: a prompt token, then plain 0.95 (masked), sensitive 0.95 (kept), three sensitive below 0.5 in a row
    # (a region of 3 of its 4 sensitive tokens), plain 0.99 (masked), padding
    # row 1: plain 0.5, two low sensitive, plain exactly 0.9 (masked), one low sensitive, plain 0.6: runs of 2 and 1
    p = torch.tensor([[nan, .95, .95, .2, .3, .1, .99, nan],
                      [.5, .2, .2, .9, .1, .6, nan, nan]])
    valid = ~torch.isnan(p)
    sens = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0],
                         [0, 1, 1, 0, 1, 0, 0, 0]])
    log_p = torch.where(valid, torch.log(torch.nan_to_num(p, nan=1.0)), torch.zeros_like(p)).requires_grad_(True)
    s = CuSeTSettings(mask_confidence=0.9, region_confidence=0.5, min_region_tokens=3, region_alpha=1.0,
                      max_sample_weight=2.0)
    r = cuset_loss(log_p, valid, sens, s)
    assert r.masked_BT.tolist() == [[False, True, False, False, False, False, True, False],
                                    [False, False, False, True, False, False, False, False]]
    assert r.region_BT[0].tolist() == [False, False, False, True, True, True, False, False]
    assert not r.region_BT[1].any()
    assert r.weight_B.tolist() == pytest.approx([1.75, 1.0])
    nll0 = -(math.log(.95) + math.log(.2) + math.log(.3) + math.log(.1))
    nll1 = -(math.log(.5) + math.log(.2) + math.log(.2) + math.log(.1) + math.log(.6))
    assert float(r.loss.detach()) == pytest.approx((1.75 * nll0 + nll1) / 12)  # over all 12 completion tokens
    r.loss.backward()
    g = log_p.grad
    assert g[0, 1] == 0 and g[0, 6] == 0 and g[1, 3] == 0  # masked tokens get no gradient
    assert float(g[0, 3]) == pytest.approx(-1.75 / 12) and float(g[1, 0]) == pytest.approx(-1 / 12)
    stats = r.stats()
    assert stats["cuset/masked_fraction"] == pytest.approx(3 / 12)
    assert stats["cuset/sensitive_fraction"] == pytest.approx(7 / 12)
    assert stats["cuset/region_fraction"] == pytest.approx(3 / 7)
    assert stats["cuset/mean_sample_weight"] == pytest.approx(1.375)
    # with nothing masked (p < 1 everywhere) and no weighting it is TRL's plain loss: the mean NLL of the completion
    plain = cuset_loss(log_p.detach(), valid, sens, CuSeTSettings(mask_confidence=1.0, region_alpha=0.0))
    assert float(plain.loss) == pytest.approx(float(-log_p.detach().sum() / valid.sum()))
    # the cap, and the accumulated batch's denominator
    capped = cuset_loss(log_p.detach(), valid, sens, CuSeTSettings(region_alpha=2.0, max_sample_weight=2.0),
                        num_items_in_batch=24)
    assert capped.weight_B.tolist() == pytest.approx([2.0, 1.0])
    assert float(capped.loss) == pytest.approx((2.0 * nll0 + nll1) / 24)
    # a shorter minimum region turns row 1's runs into regions: all 3 of its sensitive tokens at length 1 (row 0:
    # still 3 of 4, its confident sensitive token is no region), 2 of 3 at length 2
    short = cuset_loss(log_p.detach(), valid, sens, CuSeTSettings(min_region_tokens=1))
    assert short.weight_B.tolist() == pytest.approx([1.75, 2.0])
    assert cuset_loss(log_p.detach(), valid, sens, CuSeTSettings(min_region_tokens=2)).weight_B[1] == \
        pytest.approx(1 + 2 / 3)


def test_region_mask_finds_runs_of_at_least_n():
    low = torch.tensor([[1, 1, 0, 1, 1, 1, 0, 1], [0, 0, 0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    assert region_mask(low, 3).int().tolist() == [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]]
    assert region_mask(low, 1).tolist() == low.tolist()
    with pytest.raises(ValueError):
        CuSeTSettings(mask_confidence=0.0)


# --------------------------------------------------------------------------------------------------- training

QUICK = ["--max-length", "1024", "--no-fewshot", "--max-examples", "3", "--batch-size", "1", "--grad-accum", "1",
         "--save-steps", "1", "--logging-steps", "1", "--no-gradient-checkpointing", "--cpu"]


def _check_adapter(model_dir, adapter_dir):
    from cudaperf.policy import Request, SamplingParams, load_policy

    pol = load_policy(f"hf:{model_dir}+{adapter_dir}", device="cpu")
    try:
        assert pol.adapter == adapter_dir
        g = pol.generate([Request(messages=({"role": "user", "content": "Write a CUDA kernel."},), task_id="t")],
                         SamplingParams(temperature=0, max_new_tokens=3))[0]
        assert g.error is None and g.completion_tokens >= 1
    finally:
        pol.close()


def test_sft_plain_end_to_end_then_resume(tiny_model, tmp_path):
    out = tmp_path / "plain"

    def args(steps: int) -> list[str]:
        return ["sft", "--model", str(tiny_model), "--out", str(out), "--objective", "plain", "--max-steps",
                str(steps), *QUICK]

    r = runner.invoke(app, args(2) + ([] if not HAVE_GPU else ["--no-eval"]))
    assert r.exit_code == 0, r.output
    record = json.loads((out / "sft_run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 2 and record["objective"] == "plain"
    assert record["data_counts"]["examples"] == 3 == len(record["candidate_ids"])
    assert math.isfinite(record["final_loss"]) and record["wall_s"] > 0
    ds = Dataset.load(default_dataset_dir())
    rows = {t["id"]: t for t in ds.tasks}
    assert all(rows[t]["split_task"] == "train" and rows[t]["split_family"] == "train" for t in record["task_ids"])
    assert (out / "checkpoints" / "checkpoint-2").is_dir()
    _check_adapter(tiny_model, out / "adapter")
    if not HAVE_GPU:
        assert "held-out evaluation skipped" in flat(r.output) and record["eval"]["ran"] is False
    # the same directory again without --resume is refused; with it, training goes on from checkpoint-2
    again = runner.invoke(app, args(2) + ["--no-eval"])
    assert again.exit_code == 2 and "--resume" in flat(again.output)
    more = runner.invoke(app, args(3) + ["--no-eval", "--resume"])
    assert more.exit_code == 0, more.output
    record = json.loads((out / "sft_run.json").read_text())
    assert record["resumed_from"] == "checkpoint-2" and record["global_step"] == 3
    assert [h["step"] for h in record["log_history"] if "loss" in h] == [1, 2, 3]
    other = runner.invoke(app, args(4) + ["--no-eval", "--resume", "--seed", "5"])
    assert other.exit_code == 2 and "examples" in flat(other.output)


class FakeSummaryWriter:
    """Stands in for torch.utils.tensorboard.SummaryWriter (tensorboard is not a test dependency)."""

    instances: list["FakeSummaryWriter"] = []

    def __init__(self, log_dir=None, **kwargs):
        self.log_dir = log_dir
        self.scalars: dict[str, list[float]] = {}
        os.makedirs(log_dir, exist_ok=True)
        FakeSummaryWriter.instances.append(self)

    def add_scalar(self, tag, value, step=None):
        self.scalars.setdefault(tag, []).append(float(value))

    def add_text(self, *args, **kwargs):
        pass

    def flush(self):
        pass

    def close(self):
        pass


def test_sft_cuset_end_to_end_with_compile_only_eval(tiny_model, tmp_path, monkeypatch):
    import sys
    import types

    import transformers.integrations as integrations
    import transformers.integrations.integration_utils as integration_utils

    pytest.importorskip("matplotlib")
    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = FakeSummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    monkeypatch.setattr(integrations, "is_tensorboard_available", lambda: True)
    monkeypatch.setattr(integration_utils, "is_tensorboard_available", lambda: True)
    FakeSummaryWriter.instances.clear()
    out = tmp_path / "cuset"
    r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--out", str(out), "--objective", "cuset",
                            "--max-steps", "2", *QUICK, "--compile-only", "--eval-tasks", "small:1",
                            "--eval-samples", "1", "--eval-turns", "1", "--eval-max-new-tokens", "4",
                            "--group-by-length", "--eval-decoder", "loop"])
    assert r.exit_code == 0, r.output
    record = json.loads((out / "sft_run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 2 and record["objective"] == "cuset"
    means = record["cuset_means"]
    assert 0.0 <= means["cuset/masked_fraction"] <= 1.0
    assert 0.0 < means["cuset/sensitive_fraction"] < 1.0  # answers hold CUDA-sensitive and plain tokens
    assert 1.0 <= means["cuset/mean_sample_weight"] <= 2.0
    assert record["cuset_alignment_failures"] == 0
    assert any("cuset/masked_fraction" in h for h in record["log_history"])
    _check_adapter(tiny_model, out / "adapter")
    (writer,) = FakeSummaryWriter.instances  # TensorBoard gets the loss and CuSeT's figures, in OUT/tb
    assert writer.log_dir == str(out / "tb") and record["tensorboard_dir"] == str(out / "tb")
    assert "train/loss" in writer.scalars and "train/cuset/masked_fraction" in writer.scalars
    ev = record["eval"]
    assert ev["ran"] is True and ev["reason"] == "compile only" and (out / "eval" / "metrics.json").is_file()
    assert ev["policy"] == f"hf:{tiny_model}+{out / 'adapter'}"
    header = json.loads((out / "eval" / "run.json").read_text())
    assert header["compile_only"] is True and header["samples"] == 1
    assert header["settings"]["decoder"] == "loop"  # the adapter's answers came from the project's decoder
    assert record["train_settings"]["group_by_length"] is True


def test_cuset_trainer_marks_only_answer_tokens(tiny_model, dataset, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cudaperf.train.sft import ChatTokenCounter, SFTTrainSettings, _make_trainer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    es = build_examples(SFTDataSettings(fewshot=True, max_examples=2), dataset=dataset,
                        counter=ChatTokenCounter(tok), max_length_tokens=1536)
    lm = AutoModelForCausalLM.from_pretrained(tiny_model)
    settings = SFTTrainSettings(objective="cuset", max_steps=1, max_length_tokens=1536, device="cpu")
    trainer = _make_trainer(lm, tok, es, settings, tmp_path, bf16=False, use_cuda=False, log=lambda _: None)
    assert trainer.cuset_alignment_failures == 0
    for row in trainer.train_dataset:
        ids, labels, sens = row["input_ids"], row["labels"], row["cuda_sensitive"]
        assert len(sens) == len(ids) == len(labels)
        assert not any(s for s, lab in zip(sens, labels) if lab == -100)  # the prompt's code is never marked
        marked = tok.decode([i for i, s in zip(ids, sens) if s])
        assert "threadIdx" in marked or "blockIdx" in marked or "<<<" in marked
        answer = tok.decode([i for i, lab in zip(ids, labels) if lab != -100])
        assert 0.05 < sum(sens) / sum(lab != -100 for lab in labels) < 0.95, answer[:200]
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    assert batch["cuda_sensitive"].shape == batch["input_ids"].shape


def test_sft_errors_are_clear(tiny_model, tmp_path):
    r = runner.invoke(app, ["sft", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "does not exist" in flat(r.output)
    r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--objective", "dpo", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "'plain' or 'cuset'" in flat(r.output)
    if not torch.cuda.is_available():
        r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--qlora", "--out", str(tmp_path / "o")])
        assert r.exit_code == 2 and "--qlora needs a CUDA GPU" in flat(r.output)
    r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--max-length", "64", "--no-fewshot",
                            "--kinds", "pytorch", "--out", str(tmp_path / "o"), "--cpu"])
    assert r.exit_code == 2 and "no training example" in flat(r.output)
    r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--resume", "--out", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "no checkpoint" in flat(r.output)
    r = runner.invoke(app, ["sft", "--model", str(tiny_model), "--eval-tasks", "nonsense", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--eval-tasks" in flat(r.output) and not (tmp_path / "sft_run.json").exists()
