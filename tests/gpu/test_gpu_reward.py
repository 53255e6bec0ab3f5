"""The reward's TRL functions on real completions through the harness on a GPU (``pytest -m gpu``): a C function
task and a PyTorch task in one reward set, the paper preset with a ranker trained here on the shipped dataset."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cudaperf.harness.result import FailureKind
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch with a CUDA device")]

FIX = Path(__file__).parent.parent / "fixtures" / "torch_fast"


def _chat(code: str, prose: str = "Here is the CUDA version.") -> list[dict[str, str]]:
    """One completion as TRL passes a conversational batch's: a list of messages."""
    return [{"role": "assistant", "content": f"{prose}\n\n```cuda\n{code}\n```\n"}]


def test_trl_reward_call_on_c_and_pytorch_completions():
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.harness.run_pytorch import sandbox_python
    from cudaperf.ranker.train import RankerSettings, train_ranker
    from cudaperf.reward.adapters import HarnessRewards
    from cudaperf.reward.composite import RewardSettings, completion_code
    from cudaperf.reward.terms import r_ver
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    _, why = sandbox_python()
    if why:
        pytest.skip(why)  # the PyTorch task's candidates run in a sandboxed Python with torch
    ranker = train_ranker(Dataset.load(default_dataset_dir()), settings=RankerSettings(min_steps=300))
    saxpy = find_task(load_builtin_tasks(), "saxpy")
    relu = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    bundled = {c.label: c.source for c in builtin_candidates() if c.task_id == "saxpy"}
    completions = [
        ("saxpy", _chat(bundled["fast"])),
        ("saxpy", _chat(bundled["wrong"])),
        ("saxpy", _chat(bundled["fast"].rstrip().rstrip("}"))),                      # does not compile
        ("saxpy", [{"role": "assistant", "content": "A CUDA port is not worth it here."}]),  # no code
        ("saxpy", _chat(bundled["fast"], prose="Same kernel, other words.")),        # the memo's
        ("relu", _chat((FIX / "relu.cu").read_text())),
        ("relu", _chat((FIX / "relu_wrong.cu").read_text())),
    ]
    ids = [t for t, _ in completions]
    batch = [c for _, c in completions]
    rw = HarnessRewards([saxpy, relu], settings=RewardSettings("paper"), structural=ranker.score_code)
    ver_fn, str_fn = rw.functions()
    ver = ver_fn(prompts=["p"] * len(batch), completions=batch, completion_ids=None, task_id=ids)
    strs = str_fn(prompts=["p"] * len(batch), completions=batch, completion_ids=None, task_id=ids)
    total = asyncio.run(rw.async_total()(prompts=["p"] * len(batch), completions=batch, completion_ids=None,
                                         task_id=ids))
    assert rw.evaluations == 6  # 7 completions, the repeated kernel evaluated once for all three functions

    results = [rw.result(t, c[0]["content"]) for t, c in completions]
    assert all(r.status == "scored" for r in results), [r.failure for r in results]
    fast, wrong, broken, no_code, again, unit, unit_wrong = results
    assert fast.correct and fast.speedup > 0 and fast.candidate_timing is not None
    assert unit.correct and unit.speedup > 0, unit.failure
    assert wrong.failure.kind == FailureKind.WRONG_OUTPUT and unit_wrong.failure.kind == FailureKind.WRONG_OUTPUT
    assert broken.failure.kind == FailureKind.COMPILE_ERROR
    assert again is fast
    # R_ver from each memoised result, by PAPER-SPEC section 4's constants; a correct candidate beats a
    # non-compiling one (-3) whatever its speed, and no code at all is -3 too
    assert ver == pytest.approx([r_ver(r) for r in results])
    assert ver[2] == ver[3] == -3.0 and min(ver[0], ver[5]) > -3.0 and ver[4] == ver[0]
    # R_str: the ranker's score of the code; none without code (the paper preset adds nothing then)
    assert strs[0] == pytest.approx(ranker.score_code(completion_code(batch[0][0]["content"])))
    assert strs[3] is None
    assert total == pytest.approx([v + (s or 0.0) for v, s in zip(ver, strs)])
    assert len(rw.log) == 3 * len(batch) and {"r_ver", "r_str", "total"} <= set(rw.log[0])
