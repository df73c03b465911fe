"""Triton Python-backend model for a tensorforge engine (copied verbatim as <repo>/<model>/1/model.py).

`tensorforge export-triton` writes this file next to `model.engine`; Triton runs it in its Python-backend stub,
which must be able to import tensorforge (and torch). Each model instance loads the engine once, on the device
Triton names for it (`model_instance_kind`, `model_instance_device_id`), warms it up, and then runs every batch
of requests Triton's dynamic batcher hands to `execute` as one engine call per shape group (EngineModel.run_batch).
Tensors cross to and from Triton by DLPack (no host copy when they live on the GPU). Never imported by tensorforge.
"""

import os

import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack

from tensorforge.serve.model import EngineModel, RequestError


class TritonPythonModel:
    def initialize(self, args):
        gpu = args["model_instance_kind"] == "GPU"
        device = f"cuda:{int(args['model_instance_device_id'])}" if gpu else "cpu"
        path = os.path.join(args["model_repository"], args["model_version"], "model.engine")
        self.model = EngineModel(path, name=args["model_name"], device=device, version=args["model_version"])
        self.model.warmup()
        self.datatypes = {t.name: t.datatype for t in self.model.inputs}

    def _inputs(self, request) -> dict:
        feed = {}
        for spec in self.model.inputs:
            t = pb_utils.get_input_tensor_by_name(request, spec.name)
            if t is None:
                raise RequestError(f"missing input {spec.name!r}")
            feed[spec.name] = torch.from_numpy(t.as_numpy()) if t.is_cpu() else from_dlpack(t.to_dlpack())
        self.model.check({k: (self.datatypes[k], tuple(v.shape)) for k, v in feed.items()})
        return feed

    def execute(self, requests):
        responses: list = [None] * len(requests)
        feeds, members = [], []
        for k, request in enumerate(requests):
            try:
                feeds.append(self._inputs(request))
                members.append(k)
            except RequestError as e:
                responses[k] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
        try:
            outs = self.model.run_batch(feeds) if feeds else []
        except Exception as e:  # noqa: BLE001 - the batch's error goes to each of its requests
            for k in members:
                responses[k] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
            return responses
        for k, out in zip(members, outs):
            tensors = [pb_utils.Tensor.from_dlpack(n, to_dlpack(v.contiguous())) if v.is_cuda
                       else pb_utils.Tensor(n, v.contiguous().numpy()) for n, v in out.items()]
            responses[k] = pb_utils.InferenceResponse(output_tensors=tensors)
        return responses
