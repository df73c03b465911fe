"""Memory plan: tensors alive together never share bytes; peak ≤ the naive sum and ≥ the widest live set."""

import random

import pytest

import tensorforge as tfg
from tensorforge.builder.memory_plan import ALIGN, lifetimes, plan_memory
from tensorforge.ir import Layer


def check_plan(layers, sizes, keep):
    plan = plan_memory(layers, sizes, keep)
    live = lifetimes(layers, set(sizes), set(keep))
    names = sorted(plan.offsets)
    assert set(names) == set(sizes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (a0, a1), (b0, b1) = live[a], live[b]
            if a0 <= b1 and b0 <= a1:               # alive at the same time → disjoint byte ranges
                assert (plan.offsets[a] + plan.sizes[a] <= plan.offsets[b]
                        or plan.offsets[b] + plan.sizes[b] <= plan.offsets[a]), (a, b)
    widest = max(sum(plan.sizes[n] for n in names if live[n][0] <= t <= live[n][1]) for t in range(len(layers) + 1))
    assert widest <= plan.peak_bytes <= plan.naive_bytes == sum(plan.sizes.values())
    assert all(o % ALIGN == 0 for o in plan.offsets.values())
    return plan


def test_chain_needs_two_buffers():
    layers = [Layer(f"l{i}", "Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(6)]
    sizes = {f"t{i}": 1024 for i in range(1, 7)}
    plan = check_plan(layers, sizes, {"t6"})
    assert plan.peak_bytes == 2 * 1024 and plan.naive_bytes == 6 * 1024


def test_residual_block_keeps_the_skip_alive():
    layers = [Layer("a", "Relu", ["x"], ["a"]), Layer("b", "Relu", ["a"], ["b"]), Layer("c", "Relu", ["b"], ["c"]),
              Layer("d", "Add", ["c", "a"], ["d"])]
    plan = check_plan(layers, {"a": 512, "b": 512, "c": 512, "d": 512}, {"d"})
    assert plan.peak_bytes == 3 * 512                # a lives across b and c


@pytest.mark.parametrize("seed", range(20))
def test_random_dags(seed):
    rng = random.Random(seed)
    names, layers, sizes = ["in"], [], {}
    for i in range(rng.randint(3, 40)):
        ins = rng.sample(names, min(len(names), rng.randint(1, 3)))
        out = f"t{i}"
        layers.append(Layer(f"l{i}", "Add", ins, [out]))
        sizes[out] = rng.choice([1, 100, 256, 1000, 4096, 70000])
        names.append(out)
    keep = set(rng.sample(list(sizes), 2))
    check_plan(layers, sizes, keep)


def test_builder_records_the_plan():
    from rt_models import affine_relu
    info = tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (64, 4))},
                     optimization_level=0).data.build_info["memory"]          # unfused: one layer per node
    # four float32 activations of 64x4 at the max shape (1 KiB each, aligned): a chain → two live at a time
    # (t2 = relu(t1) and then y = t2 − x: t0,t1,t2,y each die at the next layer, y is kept)
    assert info == {"activation_peak_bytes": 2048, "activation_naive_bytes": 4096, "tensors": 4,
                    "host_value_inputs": {}}


def test_fused_build_plan_is_consistent():
    from rt_models import affine_relu
    data = tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (64, 4))}).data
    info = data.build_info["memory"]
    assert 0 < info["activation_peak_bytes"] <= info["activation_naive_bytes"]
    assert info["tensors"] == sum(1 for layer in data.layers if layer.placement != "host" for o in layer.outputs if o)
