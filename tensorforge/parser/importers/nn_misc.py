"""Importers for Softmax/LogSoftmax/Hardmax, Dropout, Flatten, Resize/Upsample, DepthToSpace/SpaceToDepth
and GridSample.

Opset-dependent semantics are normalised here so each IR op has one meaning:
- Softmax family before 13 normalises the 2-D flattening at `axis` (rows = dims before it): when `axis` is the
  last dim that equals the along-axis op; otherwise Flatten → op(axis=1) → Reshape back to Shape(x).
- Dropout at inference is the identity; only a used mask output makes a layer (all True; version 7 types the
  mask like the data). training_mode must be absent or a constant false.
- Resize-10 and Upsample-7/9 (scales only) are Resize with coordinate_transformation_mode=asymmetric and, for
  nearest, onnxruntime's rule for those versions: ⌊x⌋ when upsampling (Upsample always), ⌈x⌉ when downsampling.
- GridSample-16's mode names bilinear/bicubic become linear/cubic (version 20 names).
"""

import torch

from ...util.errors import ModelError, UnsupportedOpError
from ..registry import importer

_OLD_SOFTMAX, _NEW_SOFTMAX = (1, 11), (13,)


def _softmax_family(ir_op):
    def fn(ctx, node, inputs):
        x, axis = inputs[0], node.attrs["axis"]
        if node.version >= 13:
            return [ctx.add1(ir_op, [x], {"axis": axis})]
        info = ctx.info(x)
        rank = len(info.shape) if info is not None and info.shape is not None else None
        if axis == -1 or (rank is not None and axis % rank == rank - 1):
            return [ctx.add1(ir_op, [x], {"axis": -1})]
        flat = ctx.add1("Flatten", [x], {"axis": axis})
        y = ctx.add1(ir_op, [flat], {"axis": 1})
        shape = ctx.add1("Shape", [x], {"start": 0, "end": None})
        return [ctx.add1("Reshape", [y, shape], {"allowzero": 0})]
    return fn


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    importer(_op, versions=_OLD_SOFTMAX + _NEW_SOFTMAX)(_softmax_family(_op))


@importer("Dropout", versions=(7, 10, 12, 13, 22))
def import_dropout(ctx, node, inputs):
    if len(inputs) > 2 and inputs[2]:
        mode = ctx.constant_value(inputs[2])
        if mode is None or bool(mode.reshape(-1)[0]):
            raise UnsupportedOpError(f"{node.where()}: training_mode is true or not a constant",
                                     "export the model in eval mode (model.eval()) so Dropout is the identity")
    if len(node.outputs) < 2 or not node.outputs[1]:
        return [inputs[0]]
    y, mask = ctx.add("Dropout", [inputs[0]], num_outputs=2)
    if node.version == 7:
        mask = ctx.add1("CastLike", [mask, inputs[0]])
    return [y, mask]


@importer("Flatten", versions=(1, 9, 11, 13, 21, 23, 24, 25))
def import_flatten(ctx, node, inputs):
    return [ctx.add1("Flatten", inputs[:1], {"axis": node.attrs["axis"]})]


@importer("DepthToSpace", versions=(1, 11, 13, 28))
@importer("SpaceToDepth", versions=(1, 13, 28))
def import_depth_space(ctx, node, inputs):
    if "blocksize" not in node.attrs:
        raise ModelError(f"{node.where()}: the blocksize attribute is required", "re-export the model")
    mode = node.attrs.get("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ModelError(f"{node.where()}: mode {mode!r} is not DCR or CRD", "re-export the model")
    return [ctx.add1(node.op_type, inputs[:1], {"blocksize": node.attrs["blocksize"], "mode": mode})]


_GRID_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


@importer("GridSample", versions=(16, 20, 22))
def import_grid_sample(ctx, node, inputs):
    mode = node.attrs["mode"]
    mode = _GRID_16.get(mode) if node.version == 16 else (mode if mode in _GRID_16.values() else None)
    if mode is None or node.attrs["padding_mode"] not in ("zeros", "border", "reflection"):
        raise ModelError(f"{node.where()}: mode {node.attrs['mode']!r} / padding_mode "
                         f"{node.attrs['padding_mode']!r} is not valid for this version", "re-export the model")
    attrs = {"mode": mode, "padding_mode": node.attrs["padding_mode"], "align_corners": node.attrs["align_corners"]}
    return [ctx.add1("GridSample", inputs[:2], attrs)]


# ---- Resize / Upsample ------------------------------------------------------------------------------
_CTM = {11: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
             "tf_crop_and_resize"),
        18: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"),
        19: ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
             "tf_crop_and_resize")}
_RESIZE_ATTRS = ("coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                 "mode", "nearest_mode", "antialias", "axes", "keep_aspect_ratio_policy")


@importer("Resize", versions=(11, 13, 18, 19))
def import_resize(ctx, node, inputs):
    a = node.attrs
    allowed = _CTM[19 if node.version >= 19 else 18 if node.version == 18 else 11]
    if a["coordinate_transformation_mode"] not in allowed:
        raise UnsupportedOpError(f"{node.where()}: coordinate_transformation_mode "
                                 f"{a['coordinate_transformation_mode']!r} is not supported",
                                 f"this version allows {', '.join(allowed)}")
    if a["mode"] not in ("nearest", "linear", "cubic"):
        raise UnsupportedOpError(f"{node.where()}: mode {a['mode']!r} is not supported", "use nearest, linear or cubic")
    if a.get("antialias") and a["mode"] == "nearest":
        raise ModelError(f"{node.where()}: antialias applies to linear and cubic only", "re-export the model")
    attrs = {k: a[k] for k in _RESIZE_ATTRS if k in a}
    ins = (inputs + ["", "", ""])[:4]
    return [ctx.add1("Resize", ins, attrs)]


def _legacy_resize(ctx, node, x, scales_name, scales):
    mode = node.attrs["mode"]
    if mode not in ("nearest", "linear", "bilinear"):
        raise UnsupportedOpError(f"{node.where()}: mode {mode!r} is not supported", "use nearest or linear")
    attrs = {"mode": "linear" if mode != "nearest" else "nearest", "coordinate_transformation_mode": "asymmetric"}
    values = [float(s) for s in scales.reshape(-1).tolist()] if scales is not None else None
    if mode == "nearest" and node.op_type == "Upsample":
        if values is not None and min(values) < 1:
            raise ModelError(f"{node.where()}: Upsample scales {values} must be ≥ 1", "use Resize to downsample")
        attrs["nearest_mode"] = "floor"
    elif mode == "nearest":
        if values is None:
            raise UnsupportedOpError(f"{node.where()}: nearest Resize-10 needs constant scales",
                                     "its rounding depends on whether each axis up- or downsamples; export with "
                                     "opset 11 or later")
        if all(s >= 1 for s in values):
            attrs["nearest_mode"] = "floor"
        elif all(s <= 1 for s in values):
            attrs["nearest_mode"] = "ceil"
        else:
            raise UnsupportedOpError(f"{node.where()}: nearest with scales {values} both up- and downsamples",
                                     "export with opset 11 or later (Resize with an explicit nearest_mode)")
    return [ctx.add1("Resize", [x, "", scales_name, ""], attrs)]


@importer("Resize", versions=(10,))
@importer("Upsample", versions=(9,))
def import_resize_10(ctx, node, inputs):
    return _legacy_resize(ctx, node, inputs[0], inputs[1], ctx.constant_value(inputs[1]))


@importer("Upsample", versions=(7,))
def import_upsample_7(ctx, node, inputs):
    if "scales" not in node.attrs:
        raise ModelError(f"{node.where()}: the scales attribute is required", "re-export the model")
    scales = torch.tensor(node.attrs["scales"], dtype=torch.float32)
    return _legacy_resize(ctx, node, inputs[0], ctx.const(scales, name="scales"), scales)
