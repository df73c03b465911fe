"""IEngineInspector: `engine.create_engine_inspector()` → per-layer and whole-engine information, as TensorRT's.

    inspector = engine.create_engine_inspector()
    inspector.get_layer_information(0, trt.LayerInformationFormat.ONE_LINE)   # one text line
    inspector.get_engine_information(trt.LayerInformationFormat.JSON)         # {"Layers": [...], "Bindings": [...]}

The JSON is runtime.profiler.layer_info (what `tensorforge exec --exportLayerInfo` writes): every layer's name,
op, TensorRT LayerType, inputs/outputs with shapes and dtypes, weights, tactic, precision and ONNX origin. Layer
information is always detailed here (ProfilingVerbosity does not strip it); ONE_LINE is one line per layer.
"""

import json

from ...runtime.profiler import layer_info
from ...util.errors import UsageError
from .enums import LayerInformationFormat
from .layer_types import layer_type
from .strict import TrtObject


class IEngineInspector(TrtObject):
    def __init__(self, engine):
        self.engine = engine           # the ICudaEngine
        self.execution_context = None  # TensorRT's attribute; information does not depend on the context here
        self.error_recorder = None

    def _layers(self) -> list[dict]:
        info = layer_info(self.engine.data)["Layers"]
        for row in info:
            row["TensorRTLayerType"] = layer_type(row["LayerType"]).name
        return info

    def get_layer_information(self, layer_index: int, format: LayerInformationFormat) -> str:  # noqa: A002
        layers = self._layers()
        if not 0 <= int(layer_index) < len(layers):
            raise UsageError(f"layer index {layer_index} is out of range", f"the engine has {len(layers)} layers")
        return _format(layers[int(layer_index)], LayerInformationFormat(format))

    def get_engine_information(self, format: LayerInformationFormat) -> str:  # noqa: A002
        fmt = LayerInformationFormat(format)
        layers = self._layers()
        if fmt is LayerInformationFormat.JSON:
            return json.dumps({"Layers": layers, "Bindings": self.engine.data.input_names +
                               self.engine.data.output_names}, indent=2)
        return "\n".join(_format(row, fmt) for row in layers)


def _format(row: dict, fmt: LayerInformationFormat) -> str:
    if fmt is LayerInformationFormat.JSON:
        return json.dumps(row)
    ins = ", ".join(f"{t['Name']}{t.get('Dimensions', '')}" for t in row["Inputs"])
    outs = ", ".join(f"{t['Name']}{t.get('Dimensions', '')}" for t in row["Outputs"])
    return (f"{row['Name']} [{row['TensorRTLayerType']}: {row['LayerType']}] ({ins}) -> ({outs}) "
            f"tactic={row['TacticName']} precision={row['Precision']}")
