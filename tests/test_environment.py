"""Which GPUs a process may use, and the device a child process is given."""

from __future__ import annotations

import pytest

from cudaperf.harness.environment import visible_positions

UUIDS = ["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333"]


@pytest.mark.parametrize("value,expected", [
    (None, [0, 1, 2]),
    ("1", [1]),
    ("2,0", [2, 0]),
    ("GPU-bbbb", [1]),
    ("GPU-cccc-3333,0", [2, 0]),
    ("1,7,0", [1]),  # CUDA stops at the first entry that names no GPU
    ("", []),
    ("-1", []),
    ("0,0", [0]),
])
def test_visible_positions_read_cuda_visible_devices_as_cuda_does(value, expected):
    assert visible_positions(3, UUIDS, value) == expected


def test_a_child_of_a_process_given_gpu_1_gets_gpu_1(monkeypatch):
    """The H200 run that found it: a batch started with CUDA_VISIBLE_DEVICES=1 gave its runners
    CUDA_VISIBLE_DEVICES=0, so they ran on the other GPU, beside another job."""
    import cudaperf.harness.environment as env

    monkeypatch.setattr(env, "gpu_inventory", lambda: ((1, "NVIDIA H200", "580", 143771, 143000),))
    assert env.gpu_count() == 1 and env.device_for_child(0) == "1"
