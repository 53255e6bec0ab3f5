"""cudaperf train (multi-turn GRPO through TRL) on the CPU: the returns, padding and pruning rules, the config files,
a constructed rollout judged by the real harness in compile-only mode (nvcc), and ``cudaperf train`` end to end on a
random-weight Llama (built here, nothing downloaded): generation, harness, reward, update, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("datasets")

from conftest import HAVE_GPU  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cudaperf.cli import app  # noqa: E402
from cudaperf.harness.result import EvaluationResult, Failure, FailureKind, Stage  # noqa: E402
from cudaperf.train.grpo import (ConfigError, GRPORunError, GRPOSettings, GRPOTrainSettings,  # noqa: E402
                                 load_config, settings_from_mapping, training_tasks)
from cudaperf.train.rollout import (PRUNED_HOPELESS, PRUNED_SOLVED, RolloutError, RolloutSettings,  # noqa: E402
                                    discounted_returns, padding_row, prune_decision, task_ids_of_groups, turn_scores)

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
GAMMA = 0.4


def flat(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------------- pure rules

def test_discounted_returns():
    assert discounted_returns([1.0, 2.0, 3.0], 0.4) == pytest.approx([1 + 0.4 * (2 + 0.4 * 3), 2 + 0.4 * 3, 3.0])
    assert discounted_returns([-3.0], 0.4) == [-3.0]
    # an unscored turn has no return and adds nothing, but still discounts
    assert discounted_returns([1.0, None, 2.0], 0.5) == pytest.approx([1 + 0.25 * 2, None, 2.0])
    assert discounted_returns([], 0.4) == []
    assert discounted_returns([1.0, 1.0], 0.0) == [1.0, 1.0]


def _res(compiled: bool = True, correct: bool = False, speedup: float | None = None, compile_only: bool = False):
    failure = None
    status = "scored"
    if compile_only:
        status = "unscored"
        failure = Failure(FailureKind.HARNESS, "compile-only run: the candidate compiled and was not run", "harness")
    elif not compiled:
        failure = Failure(FailureKind.COMPILE_ERROR, "error: expected ';'", "candidate")
    elif not correct:
        failure = Failure(FailureKind.WRONG_OUTPUT, "mismatch", "candidate")
    return EvaluationResult(task_id="t", task_kind="c_function", candidate_id="c", code_sha256=None, status=status,
                            stage=Stage.COMPILED, correct=correct, failure=failure, speedup=speedup)


def test_prune_decision():
    s = RolloutSettings(prune=True, prune_solved_speedup=2.0)
    assert prune_decision([_res(correct=True, speedup=3.0)] * 4, s) == PRUNED_SOLVED
    assert prune_decision([_res(correct=True, speedup=3.0)] * 3 + [_res(correct=True, speedup=1.5)], s) is None
    assert prune_decision([_res(compiled=False)] * 4, s) == PRUNED_HOPELESS
    assert prune_decision([_res(compiled=False)] * 3 + [_res(compile_only=True)], s) is None  # one compiled
    assert prune_decision([_res(compiled=False)] * 3 + [_res()], RolloutSettings(
        prune=True, prune_hopeless_max_compiled=1)) == PRUNED_HOPELESS
    assert prune_decision([_res(compiled=False)] * 4, RolloutSettings(prune=False)) is None


def test_compile_only_credit_and_padding():
    from cudaperf.tasks import load_builtin_tasks

    task = load_builtin_tasks()[0]
    s = RolloutSettings(reward_preset="verifiable", compile_only_credit=0.25)
    ok = _res(compile_only=True)
    b = turn_scores(task, "x", EvaluationResult(**{**ok.__dict__, "task_id": task.id}), s, None)
    assert b.total == 0.25 and b.terms["ver"] is None and b.terms["compile"] == 0.25
    bad = turn_scores(task, "x", EvaluationResult(**{**_res(compiled=False).__dict__, "task_id": task.id}), s, None)
    assert bad.total == -3.0
    assert padding_row(7) == {"prompt_ids": [7], "completion_ids": [7], "env_mask": [0]}
    assert task_ids_of_groups(["a"] * 4 + ["b"] * 4, 4) == ["a", "b"]
    with pytest.raises(RolloutError, match="split"):
        task_ids_of_groups(["a"] * 3 + ["b"] * 5, 4)
    with pytest.raises(RolloutError, match="multiple"):
        task_ids_of_groups(["a"] * 6, 4)


def test_config_parsing_and_errors(tmp_path):
    s = settings_from_mapping({"model": "m", "rollout": {"trajectories": 2, "turns": 3, "temperatures": [0.5]},
                               "train": {"max_steps": 3, "lora": {"r": 4}}})
    assert (s.model, s.rollout.group_size, s.rollout.temperatures, s.train.lora.r) == ("m", 6, (0.5,), 4)
    assert s.train.lora.alpha == GRPOTrainSettings().lora.alpha  # untouched keys keep their defaults
    timed = settings_from_mapping({"train": {"timing_budget_ms": 200.0, "max_reps": 10}})
    assert (timed.train.timing_budget_ms, timed.train.max_reps) == (200.0, 10)
    for bad, match in [({"train": {"bogus": 1}}, "unknown key bogus in \\[train\\]"),
                       ({"nope": 1}, "at the top level"),
                       ({"train": {"max_steps": "x"}}, "max_steps"),
                       ({"rollout": {"reward_preset": "best"}}, "reward_preset"),
                       ({"train": {"lora": {"rank": 4}}}, "train.lora"),
                       ({"train": {"micro_batch_rows": 5}}, "multiple of micro_batch_rows"),
                       ({"train": {"max_reps": 3}}, "max_reps >= 5"),
                       ({"train": {"timing_budget_ms": 0}}, "timing_budget_ms must be > 0")]:
        with pytest.raises(ConfigError, match=match):
            settings_from_mapping(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[train\nx = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")
    GRPOSettings().check()  # the paper preset without --ranker: the shipped ranker
    with pytest.raises(GRPORunError, match="test sets"):
        training_tasks("test")
    easy = training_tasks("train-easy:3")
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    rows = {t["id"]: t for t in Dataset.load(default_dataset_dir()).tasks}
    assert len(easy) == 3 and all(rows[t.id]["split_task"] == "train" == rows[t.id]["split_family"] for t in easy)


def test_rollouts_time_answers_as_cudaperf_eval_does():
    """One timing for evaluations and rewards: ``cudaperf eval``'s flags, the evaluations of ``cudaperf sft`` and
    ``cudaperf train`` (run_eval's default) and the rollouts' judging (GRPOTrainSettings) share their defaults,
    which differ from the harness's own (the dataset's measurements)."""
    import inspect

    from cudaperf.cli.eval import eval_command
    from cudaperf.eval.run import EVAL_MAX_REPS, EVAL_TIMING_BUDGET_MS, eval_harness_settings
    from cudaperf.harness.settings import HarnessSettings

    flags = inspect.signature(eval_command).parameters
    assert flags["timing_budget_ms"].default.default == EVAL_TIMING_BUDGET_MS == GRPOTrainSettings().timing_budget_ms
    assert flags["max_reps"].default.default == EVAL_MAX_REPS == GRPOTrainSettings().max_reps
    hs = eval_harness_settings()
    assert (hs.budget_ms, hs.max_reps) == (EVAL_TIMING_BUDGET_MS, EVAL_MAX_REPS)
    assert (hs.budget_ms, hs.max_reps) != (HarnessSettings().budget_ms, HarnessSettings().max_reps)
    assert flags["overlap_runs"].default.default is hs.overlap_runs is True


def test_shipped_configs_parse_into_valid_settings():
    files = sorted((REPO / "benchmarks" / "configs").glob("*.toml"))
    assert len(files) >= 3
    for f in files:
        s = load_config(f)
        s.check()
        assert s.rows_per_step % s.train.micro_batch_rows == 0
        assert s.train.tasks.startswith("train")


def test_cli_errors_are_clear(tmp_path):
    r = runner.invoke(app, ["train", "--config", str(tmp_path / "none.toml")])
    assert r.exit_code == 2 and "does not exist" in flat(r.output)
    (tmp_path / "c.toml").write_text("[rollout]\nturnz = 3\n")
    r = runner.invoke(app, ["train", "--config", str(tmp_path / "c.toml")])
    assert r.exit_code == 2 and "unknown key turnz in [rollout]" in flat(r.output)  # brackets printed as text
    r = runner.invoke(app, ["train", "--decoder", "vllm", "--compile-only", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "[rollout]: decoder must be one of hf, loop, graph" in flat(r.output)
    r = runner.invoke(app, ["train", "--reward", "verifiable", "--compile-only", "--model", str(tmp_path / "nope"),
                            "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "does not exist" in flat(r.output)
    r = runner.invoke(app, ["train", "--out", str(tmp_path / "o"), "--compile-only", "--ranker", str(tmp_path)])
    assert r.exit_code == 2 and "no trained ranker" in flat(r.output)
    if not HAVE_GPU:
        r = runner.invoke(app, ["train", "--reward", "verifiable", "--out", str(tmp_path / "o")])
        assert r.exit_code == 2 and "--compile-only" in flat(r.output)


# --------------------------------------------------------------------------------------------------- the model

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-layer Llama with random weights and the embedded model's tokenizer (as tests/test_sft.py builds it)."""
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from cudaperf.policy.base import PolicyError
    from cudaperf.policy.embedded import HASH_PREFIX, cache_root, file_sha256, find_gguf

    try:
        gguf = find_gguf()
    except PolicyError as exc:
        pytest.skip(str(exc))
    cached = cache_root() / "embedded" / file_sha256(gguf)[:HASH_PREFIX]
    tok = (AutoTokenizer.from_pretrained(cached) if (cached / "source.json").is_file()
           else AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    out = tmp_path_factory.mktemp("tiny_grpo_model")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_constructed_rollout_through_the_harness(tiny_model, tmp_path):
    """Recorded answers (a kernel of the dataset, a broken copy, no code) through the rollout and nvcc: rows, returns,
    padding, the log."""
    from transformers import AutoTokenizer

    from cudaperf.dataset.measure import candidate_summary
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.env.evaluator import Evaluator
    from cudaperf.env.refine import EnvContext
    from cudaperf.policy.replay import ReplayPolicy
    from cudaperf.train.rollout import Rollout, TokenizingPolicy, read_rollout_log

    task = training_tasks("train-easy:1")[0]
    ds = Dataset.load(default_dataset_dir())
    summary = candidate_summary(ds)
    code = next(c["code"] for c in ds.candidates if c["task_id"] == task.id and summary[c["candidate_id"]]["valid"])
    good, broken, none = f"<OUTPUT_CUDA>\n{code}\n</OUTPUT_CUDA>", f"<OUTPUT_CUDA>\n{code}\n}}}} oops(\n</OUTPUT_CUDA>", \
        "I cannot write this."
    answers = {(0, 0): good, (0, 1): good, (0, 2): broken, (1, 0): good, (1, 1): none}
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps({"task_id": task.id, "sample": s, "turn": t, "completion": c}) + "\n"
                              for (s, t), c in answers.items()))
    tok = AutoTokenizer.from_pretrained(tiny_model)
    s = RolloutSettings(trajectories=2, turns=3, summarizer="template", fewshot=False, reward_preset="verifiable",
                        repeat_patience=1, max_new_tokens=64)
    ctx = EnvContext(evaluator=Evaluator([task], tmp_path / "results.jsonl", compile_only=True))
    rollout = Rollout(ctx, s, tok, log_path=tmp_path / "rollouts.jsonl")
    out = rollout.collect([task.id] * s.group_size, TokenizingPolicy(ReplayPolicy(replay), tok), step=0)
    assert len(out["prompt_ids"]) == len(out["completion_ids"]) == len(out["env_mask"]) == 6
    assert out["logprobs"] is None
    assert [(r["trajectory"], r["turn"]) for r in read_rollout_log(tmp_path / "rollouts.jsonl")] == \
        [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    # scores: compiled (compile-only credit 0), compiled, compile error (-3); compiled, no code (-3, then stop)
    assert out["turn_reward"] == [0.0, 0.0, -3.0, 0.0, -3.0, None]
    assert out["turn_return"] == pytest.approx([GAMMA * GAMMA * -3, GAMMA * -3, -3.0, GAMMA * -3, -3.0, None])
    assert out["padding"] == [False] * 5 + [True] and out["stop"][4] == "no_code"
    assert out["env_mask"][5] == [0] and all(set(m) == {1} for m in out["env_mask"][:5])
    assert all(c[-1] == tok.eos_token_id for c in out["completion_ids"])
    eos_text = tok.decode(out["completion_ids"][0][:-1])
    assert "OUTPUT_CUDA" in eos_text
    rows = read_rollout_log(tmp_path / "rollouts.jsonl")
    assert rows[0]["evaluation"]["compiled"] is True and rows[2]["evaluation"]["failure_kind"] == "compile_error"
    assert rows[1]["prompt"] and "[FEEDBACK]" in rows[1]["prompt"]  # the turn's own context, with feedback
    assert rows[5]["padding"] and rows[5]["reward"] is None and rows[5]["turn_return"] is None
    assert ctx.evaluator.n_judged == 5


def _grpo_curves():
    import importlib.util

    spec = importlib.util.spec_from_file_location("grpo_curves", REPO / "benchmarks" / "grpo_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _adapter_b_norm(adapter_dir: Path) -> float:
    from safetensors.torch import load_file

    w = load_file(str(adapter_dir / "adapter_model.safetensors"))
    return float(sum(v.abs().sum() for k, v in w.items() if "lora_B" in k))


def test_grpo_end_to_end_then_resume(tiny_model, tmp_path):
    out = tmp_path / "grpo"
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'''model = "{tiny_model}"
out = "{out}"
[rollout]
trajectories = 2
turns = 2
max_new_tokens = 12
summarizer = "policy"
summary_max_new_tokens = 4
fewshot = false
reward_preset = "verifiable"
decoder = "loop"
[train]
tasks = "train-easy:2"
prompts_per_step = 1
micro_batch_rows = 2
learning_rate = 0.01
save_steps = 1
device = "cpu"
gradient_checkpointing = false
[train.lora]
r = 4
alpha = 8
[eval]
every_steps = 2
tasks = "small:1"
samples = 1
turns = 1
max_new_tokens = 4
decoder = "loop"
''')
    r = runner.invoke(app, ["train", "--config", str(cfg), "--max-steps", "2", "--compile-only"])
    assert r.exit_code == 0, r.output
    record = json.loads((out / "grpo_run.json").read_text())
    assert record["status"] == "done" and record["global_step"] == 2 and record["group_size"] == 4
    assert record["settings"]["train"]["compile_only"] is True
    # the rollouts and the evaluation decoded the live LoRA model with the project's decoder
    assert record["settings"]["rollout"]["decoder"] == "loop" and record["settings"]["eval"]["decoder"] == "loop"
    assert (out / "checkpoints" / "checkpoint-2").is_dir()
    assert _adapter_b_norm(out / "adapter") > 0  # LoRA B starts at zero: the update moved it
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    per = {}
    for row in rows:
        per.setdefault((row["step"], row["task_id"]), []).append(row)
    assert len(per) == 2 and all(len(v) == 4 for v in per.values())  # m x T rows per prompt and step
    for v in per.values():
        for j in (0, 1):
            traj = sorted((x for x in v if x["trajectory"] == j), key=lambda x: x["turn"])
            for a, b in zip(traj, traj[1:]):
                if a["reward"] is not None and b["turn_return"] is not None:
                    assert a["turn_return"] == pytest.approx(a["reward"] + GAMMA * b["turn_return"])
            assert traj[-1]["padding"] or traj[-1]["turn_return"] == traj[-1]["reward"]
    for row in rows:
        if row["padding"]:
            assert row["reward"] is None and row["turn_return"] is None
        else:
            assert row["gen_error"] is None and row["completion"] is not None
    history = record["log_history"]
    assert any("rollout/pruned_fraction" in h for h in history)
    assert any("rewards/turn_return/mean" in h for h in history)
    (ev,) = record["evals"]
    assert ev["step"] == 2 and (out / "evals" / "step-2" / "metrics.json").is_file()
    # benchmarks/grpo_curves.py reads the run: its steps, the answers judged (rows not padding), the evaluation
    curves = _grpo_curves().load(out)
    assert curves["steps"] == 2 and curves["judged"] == sum(not r["padding"] for r in rows)
    assert [s for s, _ in curves["series"]["reward"]] == [1, 2] and curves["evals"][0][0] == 2
    assert json.loads((out / "evals" / "step-2" / "run.json").read_text())["compile_only"] is True
    # the same directory again without --resume is refused; with it, training goes on from checkpoint-2
    again = runner.invoke(app, ["train", "--config", str(cfg), "--max-steps", "2", "--compile-only"])
    assert again.exit_code == 2 and "--resume" in flat(again.output)
    more = runner.invoke(app, ["train", "--config", str(cfg), "--max-steps", "3", "--compile-only", "--resume",
                               "--eval-every", "0"])
    assert more.exit_code == 0, more.output
    record = json.loads((out / "grpo_run.json").read_text())
    assert record["resumed_from"] == "checkpoint-2" and record["global_step"] == 3
    steps = {json.loads(x)["step"] for x in (out / "rollouts.jsonl").read_text().splitlines()}
    assert steps == {0, 1, 2}
    assert len(list((out / "harness").glob("attempt-*.jsonl"))) == 2
