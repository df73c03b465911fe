"""OnnxParser: TensorRT's ONNX parser interface over tensorforge's parser.

    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model_bytes):            # or parser.parse_from_file("model.onnx")
        for i in range(parser.num_errors):
            print(parser.get_error(i))

A successful parse fills `network` (which must be empty) with the parsed IR. On failure `parse` returns False,
as TensorRT's does, and the errors list every node tensorforge cannot import with its reason (the capability
walk of capability.py), not only the first; file-level problems give one error.
"""

from ...parser import parse_model, supported_versions
from ...util.errors import FileNotFound, ModelError, TensorforgeError
from ...util.log import Logger
from .capability import capability_report
from .enums import ErrorCode
from .network import NetworkDefinition
from .strict import TrtObject


class ParserError:
    def __init__(self, code: ErrorCode, desc: str, node: int = -1, node_name: str = "", node_operator: str = ""):
        self._code, self._desc, self._node, self._name, self._op = code, desc, node, node_name, node_operator

    def code(self) -> ErrorCode:
        return self._code

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def node_name(self) -> str:
        return self._name

    def node_operator(self) -> str:
        return self._op

    def file(self) -> str:
        return ""

    def line(self) -> int:
        return 0

    def func(self) -> str:
        return ""

    def __str__(self) -> str:
        where = f"In node {self._node} with name: {self._name} and operator: {self._op}: " if self._node >= 0 else ""
        return f"{where}{self._code.name}: {self._desc}"

    __repr__ = __str__


class OnnxParser(TrtObject):
    def __init__(self, network: NetworkDefinition, logger: Logger | None = None):
        self.network, self.logger = network, logger or Logger()
        self._errors: list[ParserError] = []

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors.clear()

    def parse(self, model: bytes, path: str | None = None) -> bool:
        """Parse serialized ONNX bytes. `path` (TensorRT's meaning): the model file's path, whose folder holds its
        external weights; without it a model with external data is refused. True on success."""
        import os
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        folder = folder if folder and os.path.isdir(folder) else None
        return self._parse(bytes(model), path or "model", folder)

    def parse_from_file(self, model: str) -> bool:
        return self._parse(str(model), str(model))

    def _parse(self, source, label: str, external_data_dir=None) -> bool:
        try:
            net = parse_model(source, external_data_dir=external_data_dir)
        except FileNotFound as e:
            self._record(ParserError(ErrorCode.MODEL_DESERIALIZE_FAILED, str(e)))
            return False
        except TensorforgeError as e:
            self._explain(source, e)
            return False
        self.network._adopt(net)
        self.logger.info(f"parsed {label}: {len(net.layers)} layers, inputs {net.inputs}, outputs {net.outputs}")
        return True

    def _explain(self, source, first: TensorforgeError) -> None:
        try:
            report = capability_report(source)
        except TensorforgeError:
            report = None
        problems = [] if report is None else [p for p in report.problems() if p.status != "blocked"]
        if not problems:
            code = ErrorCode.MODEL_DESERIALIZE_FAILED if isinstance(first, ModelError) else ErrorCode.INVALID_GRAPH
            self._record(ParserError(code, str(first)))
            return
        for p in problems:
            code = ErrorCode.UNSUPPORTED_NODE if p.status == "unsupported" else ErrorCode.INVALID_NODE
            self._record(ParserError(code, p.reason, p.index, p.name, p.op_type))

    def _record(self, error: ParserError) -> None:
        self._errors.append(error)
        self.logger.error(str(error))

    def supports_operator(self, op_name: str) -> bool:
        return bool(supported_versions(op_name))

    def supports_model(self, model: bytes, path: str | None = None):
        """(all supported, [(node indices, supported)]) with consecutive nodes of one verdict grouped."""
        report = capability_report(bytes(model))
        groups: list[tuple[list[int], bool]] = []
        for n in report.nodes:
            ok = n.status == "ok"
            if groups and groups[-1][1] == ok:
                groups[-1][0].append(n.index)
            else:
                groups.append(([n.index], ok))
        return report.supported, groups
