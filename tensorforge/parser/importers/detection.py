"""Importers for NonMaxSuppression (10, 11), RoiAlign (10, 16, 22) and MaxRoiPool (1, 22).

RoiAlign-10 has no coordinate_transformation_mode: its behaviour is 16's "output_half_pixel" (no half-pixel
offset, regions at least 1×1), so the importer says so explicitly; 16 defaults to "half_pixel".
"""

from ..registry import importer

_ROI = ("mode", "output_height", "output_width", "sampling_ratio", "spatial_scale")


@importer("NonMaxSuppression", versions=(10, 11))
def import_nms(ctx, node, inputs):
    return [ctx.add1("NonMaxSuppression", inputs, {"center_point_box": node.attrs.get("center_point_box", 0)})]


@importer("RoiAlign", versions=(10,))
def import_roi_align_10(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in _ROI if k in node.attrs}
    return [ctx.add1("RoiAlign", inputs, {**attrs, "coordinate_transformation_mode": "output_half_pixel"})]


@importer("RoiAlign", versions=(16, 22))
def import_roi_align(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in _ROI + ("coordinate_transformation_mode",) if k in node.attrs}
    return [ctx.add1("RoiAlign", inputs, attrs)]


@importer("MaxRoiPool", versions=(1, 22))
def import_max_roi_pool(ctx, node, inputs):
    attrs = {"pooled_shape": list(node.attrs["pooled_shape"]), "spatial_scale": node.attrs.get("spatial_scale", 1.0)}
    return [ctx.add1("MaxRoiPool", inputs, attrs)]
