"""HFPolicy on a real random-weight Llama with a tokenizer trained here: batching, seeds, finish reasons, context
limits, PEFT adapters, and the errors a bad directory gives."""

from __future__ import annotations

import copy
import os
import shutil

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from policy_fixtures import requests, tiny_model_dir  # noqa: E402,F401  (tiny_model_dir: a pytest fixture)

from cudaperf.policy import PolicyError, SamplingParams, load_policy  # noqa: E402
from cudaperf.policy.hf import HFPolicy  # noqa: E402

REQUESTS = requests()


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    p = HFPolicy(tiny_model_dir, device="cpu")
    yield p
    p.close()


def texts(gens):
    return [g.text for g in gens]


def test_batched_generation_gives_one_counted_generation_per_request(policy):
    gens = policy.generate(REQUESTS, SamplingParams(temperature=0.7, max_new_tokens=4, seed=7))
    assert len(gens) == 3
    counts = [policy.count_tokens(r.messages) for r in REQUESTS]
    assert counts[0] < counts[1] < counts[2]
    assert [g.prompt_tokens for g in gens] == counts
    for g in gens:
        assert g.error is None
        assert g.finish_reason == "length" and g.completion_tokens == 4
        assert g.extra["batch"] == 3
    assert policy.context_tokens == 256  # the config's max_position_embeddings


def test_same_seed_same_texts_other_seed_other_texts(policy):
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=12, seed=11)
    first = policy.generate(REQUESTS, params)
    again = policy.generate(REQUESTS, params)
    other = policy.generate(REQUESTS, SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=12, seed=12))
    assert texts(first) == texts(again)
    assert texts(first) != texts(other)
    assert [g.extra["seed"] for g in first] == [g.extra["seed"] for g in again]
    assert len({g.extra["seed"] for g in first}) == 3  # each request its own seed


def test_a_sample_does_not_depend_on_its_batch(tiny_model_dir, policy):
    params = SamplingParams(temperature=0.9, max_new_tokens=10, seed=3)
    together = policy.generate(REQUESTS, params)
    alone = [policy.generate([r], params)[0] for r in REQUESTS]
    assert texts(together) == texts(alone)
    small_batches = HFPolicy(tiny_model_dir, device="cpu", batch_size=2)
    try:
        split = small_batches.generate(list(reversed(REQUESTS)), params)
    finally:
        small_batches.close()
    assert texts(split) == list(reversed(texts(together)))  # order kept, batches of 2 and 1
    assert sorted(g.extra["batch"] for g in split) == [1, 2, 2]


def test_temperature_zero_is_greedy_and_deterministic(policy):
    a = policy.generate(REQUESTS, SamplingParams(temperature=0, max_new_tokens=8, seed=1))
    b = policy.generate(REQUESTS, SamplingParams(temperature=0, max_new_tokens=8, seed=2))
    c = policy.generate(REQUESTS, SamplingParams(temperature=0, max_new_tokens=8))
    assert texts(a) == texts(b) == texts(c)
    sampled = policy.generate(REQUESTS, SamplingParams(temperature=1.5, top_p=1.0, max_new_tokens=8, seed=1))
    assert texts(sampled) != texts(a)


def test_tiny_top_p_is_greedy(policy):
    """top_p so small that only the most likely token survives: sampling must give the greedy text."""
    greedy = policy.generate(REQUESTS, SamplingParams(temperature=0, max_new_tokens=8))
    nucleus = policy.generate(REQUESTS, SamplingParams(temperature=1.0, top_p=1e-6, max_new_tokens=8, seed=5))
    assert texts(nucleus) == texts(greedy)


def _with_eos_bias(tiny_model_dir, bias: float) -> HFPolicy:
    """The tiny model with an LM head whose EOS logit is shifted by ``bias`` (forcing or banning EOS)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.eos_token_id] = bias
    model.lm_head = head
    model.eval()
    return HFPolicy.from_loaded(model, tok, name="hf:eos-biased")


def test_finish_reason_stop_at_eos_and_length_without(tiny_model_dir):
    stops = _with_eos_bias(tiny_model_dir, 1e4)
    for params in (SamplingParams(temperature=0, max_new_tokens=6), SamplingParams(max_new_tokens=6, seed=1)):
        for g in stops.generate(REQUESTS, params):
            assert (g.finish_reason, g.completion_tokens, g.text) == ("stop", 1, "")
    never = _with_eos_bias(tiny_model_dir, -1e4)
    for g in never.generate(REQUESTS, SamplingParams(max_new_tokens=6, seed=1)):
        assert (g.finish_reason, g.completion_tokens) == ("length", 6)
        assert g.text


def test_context_limit(tiny_model_dir):
    short = REQUESTS[0]
    n = HFPolicy(tiny_model_dir, device="cpu").count_tokens(short.messages)
    p = HFPolicy(tiny_model_dir, device="cpu", context_tokens=n + 3)
    gens = p.generate([short, REQUESTS[2]], SamplingParams(temperature=0, max_new_tokens=10))
    assert gens[0].error is None
    assert (gens[0].finish_reason, gens[0].completion_tokens) == ("length", 3)  # what the context leaves
    assert gens[1].finish_reason == "error" and gens[1].extra["error_type"] == "context_length_exceeded"
    assert "does not fit the context" in gens[1].error and gens[1].prompt_tokens > n + 3


def test_control_tokens_in_messages_are_text(policy):
    if not policy._template_kwargs:
        pytest.skip("this transformers has no sanitize_control_tokens")
    eos = policy.tokenizer.eos_token_id
    ids = policy._encode(({"role": "user", "content": "a <|im_end|> b <|im_end|>"},))
    assert ids.count(eos) == 1  # only the template's own end of the user turn


def test_missing_or_empty_directory_is_a_policy_error(tmp_path, tiny_model_dir):
    with pytest.raises(PolicyError, match="does not exist") as e:
        HFPolicy(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyError, match="holds no transformers model"):
        HFPolicy(tmp_path / "empty")
    with pytest.raises(PolicyError, match="no PEFT adapter"):
        HFPolicy(tiny_model_dir, adapter=tmp_path / "empty")


def test_a_tokenizer_without_chat_template_is_refused(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    d = tmp_path / "no_template"
    shutil.copytree(tiny_model_dir, d)
    tok = AutoTokenizer.from_pretrained(d)
    tok.chat_template = None
    for f in d.glob("chat_template*"):
        f.unlink()
    tok.save_pretrained(d)
    assert not AutoTokenizer.from_pretrained(d).chat_template
    with pytest.raises(PolicyError, match="no chat template"):
        HFPolicy(d)


def test_peft_adapter_loads_through_the_spec(tmp_path, tiny_model_dir, policy):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(1)
    config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    adapted = peft.get_peft_model(base, config)
    adapter_dir = tmp_path / "adapter"
    adapted.save_pretrained(adapter_dir)
    saved = {k: v.clone() for k, v in adapted.state_dict().items() if "lora_B" in k}

    params = SamplingParams(temperature=0, max_new_tokens=8)
    unmerged = HFPolicy(tiny_model_dir, adapter=adapter_dir, device="cpu", merge_adapter=False)
    try:
        assert isinstance(unmerged.model, peft.PeftModel)
        loaded = {k: v for k, v in unmerged.model.state_dict().items() if "lora_B" in k}
        assert loaded.keys() == saved.keys()
        assert all(torch.equal(loaded[k], saved[k]) for k in saved)
        adapted_texts = texts(unmerged.generate(REQUESTS, params))
        # the adapted model's own logits, to compare the merged weights with (float32 on the CPU)
        ids = torch.tensor([unmerged._encode(REQUESTS[0].messages)])
        with torch.inference_mode():
            unmerged_logits = unmerged.model(input_ids=ids).logits
    finally:
        unmerged.close()
    assert adapted_texts != texts(policy.generate(REQUESTS, params))

    p = load_policy(f"hf:{tiny_model_dir}+{adapter_dir}", device="cpu")  # merged by default
    try:
        assert p.name == f"hf:{tiny_model_dir}+{adapter_dir}"
        assert not isinstance(p.model, peft.PeftModel)
        assert not any("lora" in k for k in p.model.state_dict())
        with torch.inference_mode():
            merged_logits = p.model(input_ids=ids).logits
        torch.testing.assert_close(merged_logits, unmerged_logits, rtol=1e-4, atol=1e-4)
        assert texts(p.generate(REQUESTS, params)) == adapted_texts
    finally:
        p.close()


def test_from_loaded_leaves_the_models_generation_config_alone(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.generation_config.repetition_penalty = 50.0  # would change greedy text if it leaked into generate
    before = copy.deepcopy(model.generation_config.to_dict())
    p = HFPolicy.from_loaded(model, AutoTokenizer.from_pretrained(tiny_model_dir))
    plain = HFPolicy(tiny_model_dir, device="cpu")
    params = SamplingParams(temperature=0, max_new_tokens=8)
    assert texts(p.generate(REQUESTS, params)) == texts(plain.generate(REQUESTS, params))
    assert model.generation_config.to_dict() == before


def test_eval_context_tokens_reaches_the_policy_and_is_checked(tmp_path, tiny_model_dir):
    """``cudaperf eval --context-tokens``: the local policy's context is the one given (SFT adapters are evaluated
    at their training --max-length), recorded in run.json; one that leaves no room for the answer is refused."""
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app

    runner = CliRunner()
    base = ["eval", "--policy", f"hf:{tiny_model_dir}", "--compile-only", "--tasks", "builtin", "--limit", "1",
            "--samples", "1", "--turns", "1", "--max-new-tokens", "16"]
    bad = runner.invoke(app, [*base, "--context-tokens", "16", "--out", str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "leaves no room for a prompt" in bad.output
    other = runner.invoke(app, ["eval", "--policy", "oracle", "--compile-only", "--context-tokens", "4096",
                                "--out", str(tmp_path / "oracle")])
    assert other.exit_code != 0 and "for local models" in other.output
    ok = runner.invoke(app, [*base, "--context-tokens", "200", "--out", str(tmp_path / "ok")])
    assert ok.exit_code == 0, ok.output
    record = json.loads((tmp_path / "ok" / "run.json").read_text())
    assert "'context_tokens': 200" in str(record) or '"context_tokens": 200' in json.dumps(record)
    turns = [json.loads(line) for line in (tmp_path / "ok" / "turns.jsonl").read_text().splitlines()]
    # the built-in prompt does not fit the tiny model even zero-shot: the error names the context given, not the
    # model's own 256
    assert turns and all("does not fit the context of 200 tokens" in (t["gen_error"] or "") for t in turns)


def test_static_cache_gives_the_dynamic_caches_answers(tiny_model_dir, policy):
    """Bucketed left padding and filler rows change no answer: greedy and seeded sampling decode the same tokens
    with the static cache (what transformers compiles on a GPU) as with the dynamic one; two chunks, the second
    filled with filler rows."""
    static = HFPolicy(tiny_model_dir, device="cpu", batch_size=2, static_cache=True, length_bucket=16)
    try:
        for params in (SamplingParams(temperature=0, max_new_tokens=8),
                       SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=8, seed=3)):
            want = policy.generate(REQUESTS, params)
            got = static.generate(REQUESTS, params)
            assert texts(got) == texts(want)
            assert [g.completion_tokens for g in got] == [g.completion_tokens for g in want]
            assert [g.finish_reason for g in got] == [g.finish_reason for g in want]
    finally:
        static.close()
    with pytest.raises(ValueError, match="length_bucket"):
        HFPolicy(tiny_model_dir, device="cpu", static_cache=True, length_bucket=0)


def test_seeded_sampler_draws_from_the_tempered_nucleus_one_row_at_a_time():
    """The vectorized sampler (hashed uniforms, Gumbel-max): over 6,000 seeds its picks follow softmax(logits / T)
    within sampling error; top-p never picks outside the nucleus; a row's pick depends on its seed and step only,
    not on the rows beside it."""
    from cudaperf.policy.hf import _SeededSampler

    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    n, temperature = 6000, 0.8
    scores = logits.repeat(n, 1)
    ids = torch.zeros((n, 7), dtype=torch.long)  # prompt width 5: step 2
    pick = _SeededSampler(range(n), temperature, 1.0, "cpu", 5)(ids, scores).argmax(dim=-1)
    freq = torch.bincount(pick, minlength=5).double() / n
    want = torch.softmax(logits.double() / temperature, dim=-1)
    sigma = (want * (1 - want) / n).sqrt()
    assert ((freq - want).abs() <= 4 * sigma + 1e-9).all(), (freq, want)
    # top-p 0.7 at T 0.8: the first token holds 0.65 of the mass, so the nucleus is the first two
    nucleus = _SeededSampler(range(n), temperature, 0.7, "cpu", 5)(ids, scores).argmax(dim=-1)
    kept = set(nucleus.tolist())
    assert kept <= {0, 1} and kept == {0, 1}
    # one row alone picks what it picks in the batch; another step, other picks
    alone = [int(_SeededSampler([s], temperature, 1.0, "cpu", 5)(ids[:1], scores[:1]).argmax()) for s in range(50)]
    assert alone == pick[:50].tolist()
    later = _SeededSampler(range(n), temperature, 1.0, "cpu", 5)(torch.zeros((n, 8), dtype=torch.long), scores)
    assert (later.argmax(dim=-1) != pick).any()
