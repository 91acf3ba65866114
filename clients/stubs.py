"""Import the gRPC stubs that `python -m clients.protogen` generated (never committed)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

GENERATED = Path(__file__).resolve().parent / "_generated"


def load() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType]:
    """(inference_pb2, inference_pb2_grpc, management_pb2, management_pb2_grpc)."""
    if not (GENERATED / "inference_pb2_grpc.py").exists():
        raise ImportError(
            "gRPC stubs are missing: run `make install` or `python -m clients.protogen`"
        )
    # The generated modules import each other as top-level names.
    if str(GENERATED) not in sys.path:
        sys.path.append(str(GENERATED))
    import inference_pb2
    import inference_pb2_grpc
    import management_pb2
    import management_pb2_grpc

    return inference_pb2, inference_pb2_grpc, management_pb2, management_pb2_grpc
