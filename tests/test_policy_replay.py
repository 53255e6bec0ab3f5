"""ReplayPolicy (lookup order, malformed files), OraclePolicy over the built-in dataset, the summary answers, and
the policy spec parser."""

from __future__ import annotations

import json
import math

import pytest

from cudaperf.harness.extract import extract_code
from cudaperf.policy import FORMS, Policy, PolicyError, Request, SamplingParams, load_policy, parse_spec
from cudaperf.policy.replay import OraclePolicy, ReplayPolicy

PARAMS = SamplingParams()


def req(task: str, sample: int = 0, turn: int = 0, purpose: str = "candidate", text: str = "write it") -> Request:
    return Request(messages=({"role": "system", "content": "You write CUDA."}, {"role": "user", "content": text}),
                   task_id=task, sample=sample, turn=turn, purpose=purpose)


def write(tmp_path, rows, name="rec.jsonl"):
    f = tmp_path / name
    f.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return f


@pytest.fixture
def replay(tmp_path):
    return ReplayPolicy(write(tmp_path, [
        {"task_id": "a", "sample": 0, "turn": 0, "completion": "a s0 t0"},
        {"task_id": "a", "sample": 0, "turn": 1, "completion": "a s0 t1"},
        {"task_id": "a", "sample": 1, "turn": 1, "completion": "a s1 t1"},
        {"task_id": "a", "sample": 1, "completion": "a s1 any turn"},
        "",
        {"task_id": "b", "completion": "b first"},
        {"task_id": "b", "completion": "b second"},
        {"task_id": "b", "completion": "b third"},
        {"task_id": "c", "sample": 2, "turn": 3, "completion": "c only"},
    ]))


def test_replay_lookup_order(replay):
    cases = [(req("a", 0, 1), "a s0 t1", "exact", 2), (req("a", 0, 4), "a s0 t0", "sample", 1),
             (req("a", 1, 1), "a s1 t1", "exact", 3), (req("a", 1, 0), "a s1 any turn", "sample", 4),
             (req("a", 5, 0), "a s0 t1", "round_robin", 2),  # 4 rows of a: 5 % 4 = 1 -> the second
             (req("b", 0), "b first", "round_robin", 6), (req("b", 4), "b second", "round_robin", 7),
             (req("c", 0, 0), "c only", "round_robin", 9)]
    gens = replay.generate([r for r, *_ in cases], PARAMS)
    for g, (r, text, how, line) in zip(gens, cases):
        assert (g.text, g.extra["replay"], g.extra["line"]) == (text, how, line), r.key
        assert g.finish_reason == "stop" and g.error is None
        assert g.completion_tokens == len(text.split()) and g.prompt_tokens == 3 + 2
    assert replay.rows == 8 and isinstance(replay, Policy)


def test_replay_without_a_completion_is_an_error_generation(replay):
    g = replay.generate([req("nope", 3, 2)], PARAMS)[0]
    assert g.finish_reason == "error" and g.text == ""
    assert g.error.startswith("no recorded completion for") and "'nope'" in g.error


@pytest.mark.parametrize("policy_kind", ["replay", "oracle"])
def test_summary_requests_get_a_deterministic_summary(replay, policy_kind):
    p = replay if policy_kind == "replay" else OraclePolicy()
    text = "The kernel compiled and ran but was wrong at index 7. " * 20
    r = Request(messages=({"role": "user", "content": "old"}, {"role": "assistant", "content": "code"},
                          {"role": "user", "content": text}), task_id="nope", purpose="summary")
    a, b = p.generate([r], PARAMS)[0], p.generate([r], PARAMS)[0]
    assert a.error is None and a.text == b.text
    assert a.text.startswith("Summary of earlier turns: The kernel compiled and ran but was wrong at index 7.")
    assert a.text.endswith("...") and a.completion_tokens == len(a.text.split()) <= 70
    assert "old" not in a.text.split()
    assert a.prompt_tokens == 1 + 1 + len(text.split())


@pytest.mark.parametrize("line,words", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "JSON object"),
    ('{"completion": "x"}', "'task_id'"),
    ('{"task_id": "a"}', "'completion'"),
    ('{"task_id": "a", "completion": 3}', "'completion'"),
    ('{"task_id": "a", "completion": "x", "sample": -1}', "'sample'"),
    ('{"task_id": "a", "completion": "x", "sample": 1.5}', "'sample'"),
    ('{"task_id": "a", "completion": "x", "sample": 0, "turn": "1"}', "'turn'"),
    ('{"task_id": "a", "completion": "x", "turn": 1}', "needs a 'sample'"),
    ('{"task_id": "ok", "sample": 0, "turn": 0, "completion": "again"}', "repeats"),
])
def test_malformed_lines_fail_at_load_with_file_and_line(tmp_path, line, words):
    f = write(tmp_path, [{"task_id": "ok", "sample": 0, "turn": 0, "completion": "fine"}, line])
    with pytest.raises(ValueError, match=words) as e:
        ReplayPolicy(f)
    assert str(e.value).startswith(f"{f}:2:")


def test_a_missing_replay_file_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="does not exist"):
        ReplayPolicy(tmp_path / "none.jsonl")


# -- oracle ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset():
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    return Dataset.load(default_dataset_dir())


@pytest.fixture(scope="module")
def oracle(dataset):
    return OraclePolicy(dataset)


def test_oracle_gives_valid_variants_fastest_first_cycling(dataset, oracle):
    from cudaperf.dataset.measure import candidate_summary

    cs = candidate_summary(dataset)
    task = "bfs_csr_000"
    valid = [c for c in dataset.candidates if c["task_id"] == task and cs[c["candidate_id"]]["valid"]]
    expected = sorted(valid, key=lambda c: -cs[c["candidate_id"]]["speedup"])
    assert len(expected) >= 2
    n = len(expected)
    gens = oracle.generate([req(task, s) for s in range(n + 2)], PARAMS)
    got = [g.extra["candidate_id"] for g in gens]
    assert got == [c["candidate_id"] for c in expected] + [expected[0]["candidate_id"], expected[1]["candidate_id"]]
    speedups = [g.extra["speedup"] for g in gens[:n]]
    assert speedups == sorted(speedups, reverse=True) and speedups[0] == cs[expected[0]["candidate_id"]]["speedup"]
    first = gens[0]
    assert first.text.startswith("<OUTPUT_CUDA>\n") and first.text.endswith("\n</OUTPUT_CUDA>")
    assert extract_code(first.text).code.strip() == expected[0]["code"].strip()
    assert first.completion_tokens == len(first.text.split())
    assert oracle.generate([req(task, 0, turn=3)], PARAMS)[0].text == first.text  # the turn does not matter


def test_oracle_errors_for_a_task_without_valid_variant_or_outside_the_split(dataset, oracle):
    from cudaperf.dataset.measure import candidate_summary

    cs = candidate_summary(dataset)
    empty = next(t["id"] for t in dataset.tasks
                 if not any(cs[c["candidate_id"]]["valid"] for c in dataset.candidates if c["task_id"] == t["id"]))
    g = oracle.generate([req(empty)], PARAMS)[0]
    assert g.finish_reason == "error" and "no valid measured variant" in g.error
    assert "not in the dataset" in oracle.generate([req("no_such_task")], PARAMS)[0].error

    test_task = next(t["id"] for t in dataset.tasks if t["split_task"] == "test")
    train_task = next(t["id"] for t in dataset.tasks if t["split_task"] == "train")
    held_out = OraclePolicy(dataset, split="test")
    assert held_out.name == "oracle:test"
    a, b = held_out.generate([req(test_task), req(train_task)], PARAMS)
    assert a.error is None and "not in the test split" in b.error
    fam = OraclePolicy(dataset, split="family:test")
    assert fam.tasks == {t["id"] for t in dataset.tasks if t["split_family"] == "test"}
    with pytest.raises(ValueError, match="unknown split"):
        OraclePolicy(dataset, split="dev")


def test_oracle_on_a_dataset_without_measurements(dataset, tmp_path):
    from cudaperf.dataset.store import Dataset

    task = dataset.tasks[0]
    small = Dataset(root=tmp_path, tasks=[task], candidates=[c for c in dataset.candidates
                                                             if c["task_id"] == task["id"]],
                    measurements=[], manifest={})
    g = OraclePolicy(small).generate([req(task["id"])], PARAMS)[0]
    assert g.finish_reason == "error" and "no valid measured variant" in g.error
    with pytest.raises(PolicyError, match="cannot read the dataset"):
        OraclePolicy(tmp_path / "missing")


def test_oracle_speedups_are_numbers(oracle):
    assert all(not math.isnan(s) for vs in oracle._variants.values() for _, _, s in vs)


# -- specs -----------------------------------------------------------------------------------------------------
def test_parse_spec_forms(tmp_path):
    plus = tmp_path / "owner+name"
    plus.mkdir()
    assert parse_spec("embedded") == ("embedded", {})
    assert parse_spec("hf:/m") == ("hf", {"model_dir": "/m"})
    assert parse_spec("hf:/m+/a") == ("hf", {"model_dir": "/m", "adapter": "/a"})
    assert parse_spec(f"hf:{plus}") == ("hf", {"model_dir": str(plus)})  # an existing dir with '+' is the model
    assert parse_spec(f"hf:{plus}+/a") == ("hf", {"model_dir": str(plus), "adapter": "/a"})
    assert parse_spec("openai:gpt-x@http://localhost:8000/v1") == (
        "openai", {"model": "gpt-x", "base_url": "http://localhost:8000/v1"})
    assert parse_spec("openai:org/m@v2@https://h/v1") == ("openai", {"model": "org/m@v2", "base_url": "https://h/v1"})
    assert parse_spec("openai:Qwen/Qwen2.5") == ("openai", {"model": "Qwen/Qwen2.5"})
    assert parse_spec("replay:/r.jsonl") == ("replay", {"path": "/r.jsonl"})
    assert parse_spec("oracle") == ("oracle", {})
    assert parse_spec("oracle:family:test") == ("oracle", {"split": "family:test"})


@pytest.mark.parametrize("spec", ["", "nonsense", "hf:", "openai:", "replay:", "embedded:x", "oracle:",
                                  "openai:m@", "hf:+/a", "vllm:model"])
def test_bad_specs_list_the_forms(spec):
    with pytest.raises(ValueError) as e:
        parse_spec(spec)
    assert "the forms are" in str(e.value) and all(f in str(e.value) for f in FORMS)


def test_load_policy_builds_and_checks_options(tmp_path):
    f = write(tmp_path, [{"task_id": "a", "completion": "x"}])
    p = load_policy(f"replay:{f}")
    assert isinstance(p, ReplayPolicy) and p.name == f"replay:{f}"
    with pytest.raises(ValueError, match="does not take option.*batch_size"):
        load_policy(f"replay:{f}", batch_size=3)
    with pytest.raises(ValueError, match="given by the spec"):
        load_policy(f"replay:{f}", path=str(f))
    assert load_policy("oracle:val").name == "oracle:val"
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(f"hf:{tmp_path / 'no_model'}")
