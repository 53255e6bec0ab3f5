"""Real, tiny models for the policy tests: a BPE tokenizer trained here on a small text, with a ChatML chat template,
and a 2-layer Llama with random (seeded) weights, saved as save_pretrained would save a real one."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = """
Turn the sequential C loop into a CUDA kernel. Each thread computes one element of the output array.
__global__ void add(const float *a, const float *b, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
if (i < n) c[i] = a[i] + b[i]; } The kernel compiled, ran and was correct; it was 3.2x faster than the C code.
Write the answer between <OUTPUT_CUDA> and </OUTPUT_CUDA>. Use shared memory, coalesced loads and few branches.
for (int i = 0; i < n; i++) { y[i] = alpha * x[i] + y[i]; } The reduction sums the rows of a matrix with a warp.
"""

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SPECIAL = ["<pad>", "<|im_end|>", "<|im_start|>", "<unk>"]


def build_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>",
                                   unk_token="<unk>")
    fast.chat_template = CHATML
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, tokenizer, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    return model


def chat(text: str) -> tuple[dict[str, str], ...]:
    """A system and a user message."""
    return ({"role": "system", "content": "You write CUDA."}, {"role": "user", "content": text})


def requests():
    """Three requests of different prompt lengths (two for one task, different samples)."""
    from cudaperf.policy import Request

    return [Request(messages=chat("add"), task_id="vec_add", sample=0),
            Request(messages=chat("Turn the sequential C loop into a CUDA kernel."), task_id="saxpy", sample=1),
            Request(messages=chat("for (int i = 0; i < n; i++) { y[i] = alpha * x[i] + y[i]; } " * 3),
                    task_id="saxpy", sample=2)]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A directory with a random-weight 2-layer Llama and its trained tokenizer (chat template, pad, EOS)."""
    out = tmp_path_factory.mktemp("tiny_llama")
    tok = build_tokenizer(out)
    build_model(out, tok)
    return out
