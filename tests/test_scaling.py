"""The executor's throughput model: the discrete-event simulation agrees with the closed form, and the bottleneck
moves from the compile pool to the GPUs (and to the store) as the configuration changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cudaperf.harness.scaling import (
    EVAL_COSTS,
    MEASURE_COSTS,
    Cluster,
    StageCosts,
    closed_form,
    curve,
    simulate,
    table,
)

COSTS = StageCosts(compile_s=2.0, run_s=0.6, baseline_s=1.0, prepare_s=1.0, store_s=0.002, candidates_per_task=8)

CONFIGS = [  # (costs, cluster, the stage that should bind)
    (COSTS, Cluster(cores_per_node=2, gpus_per_node=1, reserved_cores_per_gpu=0), "cpu"),
    (COSTS, Cluster(cores_per_node=6, gpus_per_node=2), "cpu"),
    (COSTS, Cluster(cores_per_node=64, gpus_per_node=2), "gpu"),
    (COSTS, Cluster(cores_per_node=128, gpus_per_node=8), "gpu"),
    (COSTS, Cluster(nodes=4, cores_per_node=32, gpus_per_node=4), "gpu"),
    (replace(COSTS, store_s=0.01), Cluster(nodes=16, cores_per_node=128, gpus_per_node=8), "store"),  # 128 GPUs,
    # one writer of a store on a network disk (10 ms an append)
    (EVAL_COSTS, Cluster(cores_per_node=16, gpus_per_node=1), "gpu"),
    (EVAL_COSTS, Cluster(cores_per_node=16, gpus_per_node=8), "cpu"),
    (MEASURE_COSTS, Cluster(cores_per_node=128, gpus_per_node=8), "gpu"),
]


@pytest.mark.parametrize("costs, cluster, bound", CONFIGS)
@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_simulation_agrees_with_the_closed_form(costs, cluster, bound, jitter):
    pred = closed_form(costs, cluster)
    assert pred.bottleneck == bound, pred.capacities_per_s
    n_tasks = 30 * max(1, cluster.gpus)  # enough that fill and drain are small against the whole run
    sim = simulate(costs, cluster, n_tasks, prepare_ahead=max(2, cluster.gpus), jitter=jitter, seed=1)
    assert sim.rate_per_s == pytest.approx(pred.rate_per_s, rel=0.08), (sim, pred)
    assert sim.makespan_s == pytest.approx(pred.makespan_s(n_tasks, costs, cluster), rel=0.08)
    busy = {"cpu": sim.cpu_busy_frac, "gpu": sim.gpu_busy_frac, "store": sim.store_busy_frac}
    assert busy[bound] > 0.85 and max(busy.values()) == busy[bound]  # the binding stage is the busy one
    assert all(0 <= b <= 1 + 1e-9 for b in busy.values())


def test_the_bottleneck_switches_with_the_cores():
    """Two GPUs: compile-bound on a few cores, GPU-bound once the pool keeps up; the rate rises with the cores
    until the switch and then stays at the GPUs' rate."""
    rates, bounds = [], []
    for cores in (5, 6, 8, 12, 16, 32, 64):
        c = Cluster(cores_per_node=cores, gpus_per_node=2)
        p, s = closed_form(COSTS, c), simulate(COSTS, c, 60, prepare_ahead=2, seed=0)
        rates.append(s.rate_per_s)
        bounds.append(p.bottleneck)
    assert bounds[0] == "cpu" and bounds[-1] == "gpu"
    switch = bounds.index("gpu")
    assert all(b == "cpu" for b in bounds[:switch]) and all(b == "gpu" for b in bounds[switch:])
    assert all(a < b for a, b in zip(rates[:switch], rates[1:switch + 1]))  # more cores help while CPU-bound
    assert max(rates[switch:]) / min(rates[switch:]) < 1.05  # and then not at all


def test_more_gpus_help_until_the_compile_pool_binds():
    """16 cores: the local pool's two cores per GPU leave the compile pool short after a few GPUs; 128 cores keep
    the 8 GPUs busy."""
    small = curve(EVAL_COSTS, 16)
    big = curve(EVAL_COSTS, 128)
    assert [p.bottleneck for _, p in big] == ["gpu"] * 8
    assert big[-1][1].rate_per_s == pytest.approx(8 * big[0][1].rate_per_s)
    assert small[0][1].bottleneck == "gpu" and small[-1][1].bottleneck == "cpu"
    best = max(range(8), key=lambda i: small[i][1].rate_per_s)
    assert 0 < best < 7  # a peak in between, then fewer compile cores with every GPU
    assert "| 8 |" in table() and "(cpu)" in table() and "(gpu)" in table()


def test_inputs_are_checked():
    with pytest.raises(ValueError):
        StageCosts(compile_s=-1, run_s=1)
    with pytest.raises(ValueError):
        Cluster(nodes=0)
    with pytest.raises(ValueError):
        simulate(COSTS, Cluster(gpus_per_node=0), 3)
    assert closed_form(COSTS, Cluster(gpus_per_node=0)).rate_per_s == 0.0
