"""cudaperf.policy.decode on a real random-weight Llama (the policy tests' tiny model) on the CPU: decode_batch gives
generate's tokens (greedy and seeded sampling, ragged prompts, per-row budgets, EOS), the hf policy with decoder
loop/graph gives the answers of decoder hf, rows of several temperatures share a batch, and models the decoder
cannot handle are refused before anything runs (the policy then uses generate). The CUDA graph itself runs in
tests/gpu/test_gpu_policy.py."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from policy_fixtures import chat, requests, tiny_model_dir  # noqa: E402,F401  (tiny_model_dir: a pytest fixture)

from cudaperf.policy import PolicyError, Request, SamplingParams  # noqa: E402
from cudaperf.policy.decode import DecodeUnsupported, RowSampler, check_supported, decode_batch  # noqa: E402
from cudaperf.policy.hf import HFPolicy, _SeededSampler  # noqa: E402

REQUESTS = requests() + [Request(messages=chat("reduce"), task_id="sum", sample=3)]


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    """The tiny Llama's shape with weights drawn 15x wider than its init: peaked logits whose argmax moves when a
    position, a mask slot or a cached key is off by one (the default init's near-uniform logits often do not)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.initializer_range = 0.3
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def left_padded(prompts: list[list[int]], pad: int):
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):] = torch.tensor(p)
        mask[r, width - len(p):] = 1
    return ids, mask


def prompts_of(tiny_model_dir) -> list[list[int]]:
    p = HFPolicy(tiny_model_dir, device="cpu")
    out = [p._encode(r.messages) for r in REQUESTS]
    p.close()
    return out


def hf_new_tokens(model, ids, mask, max_new: int, sampler_args=None) -> list[list[int]]:
    from transformers import GenerationConfig, LogitsProcessorList

    cfg = GenerationConfig(max_new_tokens=max_new, min_new_tokens=max_new, do_sample=False, num_beams=1,
                           eos_token_id=[], pad_token_id=0)
    procs = LogitsProcessorList()
    if sampler_args is not None:
        procs.append(_SeededSampler(*sampler_args, "cpu", ids.shape[1]))
    with torch.inference_mode():
        seqs = model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg, logits_processor=procs)
    return seqs[:, ids.shape[1]:].tolist()


@pytest.mark.parametrize("sampled", [False, True])
def test_decode_batch_gives_generates_tokens(tiny_model_dir, model, sampled):
    """Ragged left-padded prompts, 24 tokens, no EOS: token for token what generate decodes (greedy, and with the
    seeded sampler at one temperature), whatever the prefill's row chunks."""
    prompts = prompts_of(tiny_model_dir)
    ids, mask = left_padded(prompts, pad=0)
    seeds = [11, 12, 13, 14]
    want = hf_new_tokens(model, ids, mask, 24, (seeds, 0.9, 0.8) if sampled else None)
    for prefill_rows in (1, 3, 16):
        sampler = RowSampler(seeds, 0.9, 0.8, "cpu") if sampled else None
        with torch.inference_mode():
            got, stats = decode_batch(model, ids, mask, max_new=24, budgets=[24] * 4, eos_ids=[10**6], pad_id=0,
                                      sampler=sampler, graph=True, prefill_rows=prefill_rows)
        assert got.tolist() == want
        assert stats.steps == 24 and stats.rows == 4 and stats.graph == "eager"  # no graph on a CPU
        assert stats.gqa  # 4 query heads over 2 key heads: the grouped decode attention took the steps
    with torch.inference_mode():
        plain, stats = decode_batch(model, ids, mask, max_new=24, budgets=[24] * 4, eos_ids=[10**6], pad_id=0,
                                    sampler=RowSampler(seeds, 0.9, 0.8, "cpu") if sampled else None, gqa=False)
    assert plain.tolist() == want and not stats.gqa
    assert model.config._attn_implementation == "sdpa"  # the model's own again


def test_budgets_and_eos_end_rows_and_stop_early(tiny_model_dir, model):
    """A row ends at its budget or at its EOS (then it is fed padding); when all rows have ended the loop stops at
    the next check. The EOS chosen is the token greedy decoding puts third in row 0."""
    prompts = prompts_of(tiny_model_dir)
    ids, mask = left_padded(prompts, pad=0)
    free = hf_new_tokens(model, ids, mask, 40)
    eos = free[0][2]
    with torch.inference_mode():
        got, stats = decode_batch(model, ids, mask, max_new=40, budgets=[40, 5, 40, 7], eos_ids=[eos], pad_id=0,
                                  sampler=None, check_every=4)
    got = got.tolist()
    for r in range(4):
        row, ref = got[r], free[r]
        end = next((k for k, t in enumerate(ref) if t == eos), None)
        limit = {1: 5, 3: 7}.get(r, 40)
        stop = min(limit, end + 1) if end is not None else limit
        assert row[:stop] == ref[:stop]
        assert all(t == 0 for t in row[stop:])
    if all(any(t == eos for t in ref[:40]) or r in (1, 3) for r, ref in enumerate(free)):
        assert stats.steps < 40


def test_rows_of_different_temperatures_share_a_batch(tiny_model_dir, model):
    """Each row samples as it would alone at its own temperature and top-p (greedy at 0)."""
    prompts = prompts_of(tiny_model_dir)
    ids, mask = left_padded(prompts, pad=0)
    temps, tops, seeds = [0.0, 0.7, 1.2, 0.7], [1.0, 0.9, 1.0, 0.5], [5, 6, 7, 8]
    with torch.inference_mode():
        mixed, _ = decode_batch(model, ids, mask, max_new=16, budgets=[16] * 4, eos_ids=[10**6], pad_id=0,
                                sampler=RowSampler(seeds, temps, tops, "cpu"))
    for r in range(4):
        sampler = None if temps[r] == 0 else RowSampler([seeds[r]], temps[r], tops[r], "cpu")
        r_ids, r_mask = left_padded([prompts[r]], pad=0)
        with torch.inference_mode():
            alone, _ = decode_batch(model, r_ids, r_mask, max_new=16, budgets=[16], eos_ids=[10**6], pad_id=0,
                                    sampler=sampler)
        assert mixed[r].tolist() == alone[0].tolist()
    with pytest.raises(ValueError, match="temperatures"):
        RowSampler([1, 2], [0.5], 0.9, "cpu")
    with pytest.raises(ValueError, match="top-p"):
        RowSampler([1], 0.5, 0.0, "cpu")


@pytest.mark.parametrize("decoder", ["loop", "graph"])
def test_policy_with_the_decoder_answers_as_generate(tiny_model_dir, decoder):
    """The hf policy's answers (texts, token counts, finish reasons) with decoder loop or graph are decoder hf's,
    greedy and sampled, over chunks of two requests; a chunk that ends early by EOS included (max 60 tokens)."""
    base = HFPolicy(tiny_model_dir, device="cpu", batch_size=2)
    fast = HFPolicy(tiny_model_dir, device="cpu", batch_size=2, decoder=decoder)
    try:
        for params in (SamplingParams(temperature=0, max_new_tokens=60),
                       SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=60, seed=3)):
            want = base.generate(REQUESTS, params)
            got = fast.generate(REQUESTS, params)
            assert [g.text for g in got] == [g.text for g in want]
            assert [g.completion_tokens for g in got] == [g.completion_tokens for g in want]
            assert [g.finish_reason for g in got] == [g.finish_reason for g in want]
            assert all(g.extra["decoder"] == (decoder if decoder == "loop" else "graph:eager") for g in got)
            assert all(g.extra["decoder"] == "hf" for g in want)
        assert fast.decoder_fallback is None
    finally:
        base.close()
        fast.close()
    with pytest.raises(PolicyError, match="unknown decoder"):
        HFPolicy(tiny_model_dir, device="cpu", decoder="vllm")
    with pytest.raises(PolicyError, match="static_cache"):
        HFPolicy(tiny_model_dir, device="cpu", decoder="loop", static_cache=True)


def test_unsupported_models_are_refused_and_the_policy_falls_back(tiny_model_dir, model):
    """A sliding-window model is refused by check_supported; the policy then answers through generate, says why
    once, and gives decoder hf's answers."""
    from transformers import AutoModelForCausalLM

    assert check_supported(model)[0] in ("sdpa", "eager")
    sliding = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    sliding.config.sliding_window = 8
    with pytest.raises(DecodeUnsupported, match="sliding window"):
        check_supported(sliding)
    sliding.config.sliding_window = None
    sliding.config._attn_implementation = "flash_attention_2"
    with pytest.raises(DecodeUnsupported, match="flash_attention_2"):
        check_supported(sliding)
    sliding.config._attn_implementation = "sdpa"
    sliding.config.sliding_window = 8
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    p = HFPolicy.from_loaded(sliding, tok, decoder="graph")
    plain = HFPolicy.from_loaded(sliding, tok)
    params = SamplingParams(temperature=0, max_new_tokens=8)
    with pytest.warns(UserWarning, match="sliding window"):
        got = p.generate(REQUESTS, params)
    assert p.decoder_fallback and "sliding window" in p.decoder_fallback
    assert [g.text for g in got] == [g.text for g in plain.generate(REQUESTS, params)]
    assert all(g.extra["decoder"] == "hf" for g in got)


def test_eager_attention_masks_give_the_same_tokens(tiny_model_dir):
    """The eager attention implementation takes additive float masks: the same tokens as sdpa's boolean ones."""
    from transformers import AutoModelForCausalLM

    prompts = prompts_of(tiny_model_dir)
    eager = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager").eval()
    ids, mask = left_padded(prompts, pad=0)
    want = hf_new_tokens(eager, ids, mask, 16)
    with torch.inference_mode():
        got, _ = decode_batch(eager, ids, mask, max_new=16, budgets=[16] * 4, eos_ids=[10**6], pad_id=0, sampler=None)
    assert check_supported(eager)[0] == "eager"
    assert got.tolist() == want


def test_trainer_policy_over_a_peft_model_gives_generates_token_ids(tiny_model_dir, model):
    """GRPO's policy over the live model (a PEFT LoRA model, not merged, as in training): decoder loop returns the
    token ids (prompt and completion, EOS included where it stopped) that decoder hf returns."""
    peft = pytest.importorskip("peft")
    from transformers import AutoTokenizer

    from cudaperf.train.rollout import TrainerPolicy

    torch.manual_seed(2)
    lora = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                      init_lora_weights=False)).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=48, seed=5)
    want = TrainerPolicy.over(lora, tok, batch_size=3).generate(REQUESTS, params)
    got = TrainerPolicy.over(lora, tok, batch_size=3, decoder="loop").generate(REQUESTS, params)
    assert [g.extra["completion_ids"] for g in got] == [g.extra["completion_ids"] for g in want]
    assert [g.extra["prompt_ids"] for g in got] == [g.extra["prompt_ids"] for g in want]
    assert [g.finish_reason for g in got] == [g.finish_reason for g in want]
    lora.unload()


def test_eval_decoder_option_is_checked(tmp_path, tiny_model_dir):
    """``cudaperf eval --decoder``: an unknown decoder and a decoder for a remote or recorded policy are refused
    with a message, before anything runs; a known one is recorded in run.json."""
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app

    runner = CliRunner()
    base = ["eval", "--policy", f"hf:{tiny_model_dir}", "--compile-only", "--tasks", "builtin", "--limit", "1",
            "--samples", "1", "--turns", "1", "--max-new-tokens", "16"]
    bad = runner.invoke(app, [*base, "--decoder", "vllm", "--out", str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "--decoder 'vllm': use one of hf, loop, graph" in " ".join(bad.output.split())
    other = runner.invoke(app, ["eval", "--policy", "oracle", "--compile-only", "--decoder", "graph",
                                "--out", str(tmp_path / "oracle")])
    assert other.exit_code != 0 and "--decoder is for local models" in " ".join(other.output.split())
    ok = runner.invoke(app, [*base, "--decoder", "loop", "--out", str(tmp_path / "ok")])
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "ok" / "run.json").read_text())["settings"]["decoder"] == "loop"


@pytest.mark.parametrize("decoder", ["hf", "loop"])
def test_one_call_with_a_temperature_a_request_answers_as_one_call_a_temperature(tiny_model_dir, decoder):
    """``generate(requests, [params, ...])``: each request answers as it does in a call of its own temperature and
    top-p (GRPO's trajectories at 0.2 and 0.7 in one call a turn); a list of the wrong length is refused."""
    p = HFPolicy(tiny_model_dir, device="cpu", batch_size=4, decoder=decoder)
    try:
        cold = SamplingParams(temperature=0.2, top_p=0.9, max_new_tokens=24, seed=1)
        hot = SamplingParams(temperature=1.1, top_p=0.8, max_new_tokens=24, seed=1)
        greedy = SamplingParams(temperature=0, max_new_tokens=24, seed=1)
        plist = [cold, hot, greedy, hot]
        mixed = p.generate(REQUESTS, plist)
        for r, params, g in zip(REQUESTS, plist, mixed):
            assert g.text == p.generate([r], params)[0].text
        assert [g.text for g in p.generate(REQUESTS, hot)] == [g.text for g in p.generate(REQUESTS, [hot] * 4)]
        with pytest.raises(ValueError, match="4 requests but 3"):
            p.generate(REQUESTS, plist[:3])
    finally:
        p.close()


def test_decoding_steps_ask_the_host_nothing(tiny_model_dir, model):
    """What a CUDA graph cannot hold: an op whose result the host must read (``.item()``, ``bool(tensor)``,
    ``nonzero``, ...). Counted at the dispatcher over whole decode_batch calls of 3 and of 19 tokens, the done-check
    off: the 16 extra decoding steps (sampled, top-p, the unmerged LoRA of GRPO's live model) add none."""
    peft = pytest.importorskip("peft")
    from torch.utils._python_dispatch import TorchDispatchMode

    host_reads = {"_local_scalar_dense", "nonzero", "is_nonzero", "masked_select", "unique", "_unique2", "item",
                  "equal", "allclose"}

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__.split(".")[0]
            if name in host_reads:
                self.seen.append(name)
            return func(*args, **(kwargs or {}))

    prompts = prompts_of(tiny_model_dir)
    ids, mask = left_padded(prompts, pad=0)
    torch.manual_seed(3)
    lora = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                      init_lora_weights=False)).eval()
    counts = []
    for n in (3, 19):
        with torch.inference_mode(), Count() as c:
            decode_batch(lora, ids, mask, max_new=n, budgets=[n] * 4, eos_ids=[1], pad_id=0,
                         sampler=RowSampler([1, 2, 3, 4], 0.7, 0.9, "cpu"), check_every=10**6)
        counts.append(sorted(c.seen))
    lora.unload()
    assert counts[0] == counts[1], counts


def test_grouped_decode_attention_is_transformers_attention(model):
    """gqa_decode_attention against transformers' sdpa and eager attention (which repeat the key heads) on random
    queries over a cache with masked slots: boolean and additive masks, float32."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from cudaperf.policy.decode import gqa_decode_attention

    torch.manual_seed(4)
    module = model.model.layers[0].self_attn
    rows, heads, kv, dim, slots = 3, 4, 2, 16, 11
    q = torch.randn(rows, heads, 1, dim)
    k, v = torch.randn(rows, kv, slots, dim), torch.randn(rows, kv, slots, dim)
    allowed = torch.rand(rows, 1, 1, slots) > 0.3
    allowed[..., 0] = True
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    got, _ = gqa_decode_attention(module, q, k, v, allowed, scaling=dim ** -0.5)
    want, _ = sdpa_attention_forward(module, q, k, v, allowed, scaling=dim ** -0.5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got_add, _ = gqa_decode_attention(module, q, k, v, additive, scaling=dim ** -0.5)
    want_eager, _ = eager_attention_forward(module, q, k, v, additive, scaling=dim ** -0.5)
    torch.testing.assert_close(got_add, want_eager, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="one query a row"):
        gqa_decode_attention(module, torch.randn(rows, heads, 2, dim), k, v, None)


@pytest.mark.parametrize("max_new", [1, 2, 3])
def test_the_shortest_answers(tiny_model_dir, model, max_new):
    """One to three new tokens (no decoding step, one, two): generate's tokens, one row or several."""
    prompts = prompts_of(tiny_model_dir)
    for rows in (prompts[:1], prompts):
        ids, mask = left_padded(rows, pad=0)
        want = hf_new_tokens(model, ids, mask, max_new)
        with torch.inference_mode():
            got, stats = decode_batch(model, ids, mask, max_new=max_new, budgets=[max_new] * len(rows),
                                      eos_ids=[10**6], pad_id=0, sampler=None)
        assert got.tolist() == want and stats.steps == max_new
    with pytest.raises(ValueError, match="max_new"):
        decode_batch(model, ids, mask, max_new=0, budgets=[0] * len(prompts), eos_ids=[1], pad_id=0, sampler=None)


def test_doctor_checks_the_decoder():
    """``cudaperf doctor --decoder``: on this machine (no GPU) the loop on the CPU against its eager twin and
    generate, every token the same; the check itself, on a GPU, is tests/gpu/test_gpu_policy.py's."""
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.policy.decode import self_check

    ok, detail = self_check("cpu", steps=12)
    assert ok and "the same as the eager loop: yes; as generate: 48 of 48 tokens" in detail
    r = CliRunner().invoke(app, ["doctor", "--decoder"])
    assert r.exit_code == 0 and "decoder (" in r.output and "eager loop: yes" in " ".join(r.output.split())
