"""The in-tree plugin library: custom ops that real exports contain, one folder per plugin.

Each folder has `kernel.py` (Triton), `reference.py` (torch oracle) and `__init__.py`, which defines the
Plugin objects in `PLUGINS` without registering them. `LIBRARY` maps every op_type (and alias) to its folder;
`loader.discover(op_type)` registers a folder's plugins the first time a model or engine needs them, the way
TensorRT's standard plugins are always at hand. A user plugin of the same (namespace, name, version) wins.
"""

LIBRARY = {
    "MyGelu": "gelu", "CustomGelu": "gelu",
    "LeakyReLU": "leaky_relu",
    "EfficientNMS_TRT": "efficient_nms",
    "BatchedNMSDynamic_TRT": "batched_nms",
    "TRTBatchedNMS": "trt_batched_nms",
    "MMCVRoiAlign": "roi_align", "MMCVRoIAlign": "roi_align",
    "grid_sampler": "grid_sampler",
    "MMCVModulatedDeformConv2d": "modulated_deform_conv",
    "MMCVMultiScaleDeformableAttention": "ms_deform_attn",
}
