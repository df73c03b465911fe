"""Importers for the normalisation ops.

BatchNormalization 6/7/9/14/15 → the inference form (is_test=0 in version 6, training_mode=1, or the training
outputs are refused: an engine runs with stored statistics). Versions 6/7's spatial=0 (per-activation parameters of
shape (C, D1..Dk)) is kept: the IR op broadcasts such parameters. GroupNormalization 18 (one scale/bias
per group) and 21 (per channel) share one IR op, which tells them apart by the parameter length.
"""

from ...util.errors import ModelError, UnsupportedOpError
from ..registry import importer


def _only_first_output(node, why):
    if any(node.outputs[1:]):
        raise UnsupportedOpError(f"{node.where()}: the optional outputs {[o for o in node.outputs[1:] if o]} "
                                 f"are training-mode outputs", why)


@importer("BatchNormalization", versions=(6, 7, 9, 14, 15))
def import_batch_norm(ctx, node, inputs):
    if node.version == 6 and not node.attrs["is_test"]:
        raise UnsupportedOpError(f"{node.where()}: is_test=0 (training mode) is not supported",
                                 "export the model in eval mode (model.eval()) so it uses stored statistics")
    if node.attrs.get("training_mode", 0):
        raise UnsupportedOpError(f"{node.where()}: training_mode=1 is not supported",
                                 "export the model in eval mode (model.eval()) so it uses stored statistics")
    _only_first_output(node, "export the model in eval mode (model.eval()) so it uses stored statistics")
    if len(inputs) != 5 or not all(inputs):
        raise ModelError(f"{node.where()}: needs 5 inputs (X, scale, B, mean, var)", "re-export the model")
    return [ctx.add1("BatchNormalization", inputs, {"epsilon": node.attrs["epsilon"]})]


@importer("InstanceNormalization", versions=(6, 22))
def import_instance_norm(ctx, node, inputs):
    return [ctx.add1("InstanceNormalization", inputs[:3], {"epsilon": node.attrs["epsilon"]})]


@importer("LayerNormalization", versions=(17,))
def import_layer_norm(ctx, node, inputs):
    stash = node.attrs["stash_type"]
    if stash != 1:
        raise UnsupportedOpError(f"{node.where()}: stash_type={stash} is not supported",
                                 "only float32 statistics (stash_type=1, the default) are")
    attrs = {"axis": node.attrs["axis"], "epsilon": node.attrs["epsilon"], "stash_type": 1}
    wanted = 1 + max([i for i, o in enumerate(node.outputs) if o], default=0)
    return ctx.add("LayerNormalization", inputs[:3], attrs, num_outputs=wanted)


@importer("GroupNormalization", versions=(18, 21))
def import_group_norm(ctx, node, inputs):
    if "num_groups" not in node.attrs:
        raise ModelError(f"{node.where()}: the num_groups attribute is required", "re-export the model")
    stash = node.attrs.get("stash_type", 1)     # version 18: no stash_type (float32 accumulation only adds accuracy)
    if stash != 1:
        raise UnsupportedOpError(f"{node.where()}: stash_type={stash} is not supported",
                                 "only float32 statistics (stash_type=1, the default) are")
    attrs = {"num_groups": node.attrs["num_groups"], "epsilon": node.attrs["epsilon"]}
    return [ctx.add1("GroupNormalization", inputs[:3], attrs)]


@importer("LpNormalization", versions=(1, 22))
def import_lp_norm(ctx, node, inputs):
    p = node.attrs["p"]
    if p not in (1, 2):
        raise ModelError(f"{node.where()}: p={p}; ONNX allows only 1 or 2", "re-export the model")
    return [ctx.add1("LpNormalization", inputs[:1], {"axis": node.attrs["axis"], "p": p})]


@importer("MeanVarianceNormalization", versions=(9, 13))
def import_mvn(ctx, node, inputs):
    return [ctx.add1("MeanVarianceNormalization", inputs[:1], {"axes": list(node.attrs["axes"])})]


@importer("LRN", versions=(1, 13))
def import_lrn(ctx, node, inputs):
    if "size" not in node.attrs:
        raise ModelError(f"{node.where()}: the size attribute is required", "re-export the model")
    attrs = {k: node.attrs[k] for k in ("size", "alpha", "beta", "bias") if k in node.attrs}
    return [ctx.add1("LRN", inputs[:1], attrs)]
