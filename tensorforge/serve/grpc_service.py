"""The v2 gRPC service: tritonclient's generated GRPCInferenceService messages, aliased for Ray's pickling.

tritonclient's generated messages claim `__module__ == "grpc_service_pb2"`; Ray pickles them between its gRPC
proxy and the replicas, so both sides import this module, which registers that name as an alias of
`tritonclient.grpc.service_pb2`. `add_servicer` is what `grpc_servicer_functions` names (the proxy imports it).
"""

import sys

import tritonclient.grpc.service_pb2 as pb
import tritonclient.grpc.service_pb2_grpc as pb_grpc

sys.modules.setdefault("grpc_service_pb2", pb)

SERVICER = f"{__name__}.add_servicer"


def add_servicer(servicer, server) -> None:
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
