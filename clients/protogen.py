"""Generate the gRPC stubs from the protos inside the installed TorchServe jar (run by make install).

Nothing generated is committed: the stubs always match the server that is installed.
Output: clients/_generated/{inference,management}_pb2{,_grpc}.py (+ google/rpc/status_pb2.py).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import ts
from grpc_tools import protoc

OUT = Path(__file__).resolve().parent / "_generated"
PROTOS = ("inference.proto", "management.proto", "google/rpc/status.proto")


def jar_path() -> Path:
    return Path(ts.__file__).resolve().parent / "frontend" / "model-server.jar"


def generate(out: Path = OUT) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(jar_path()) as jar:
            for name in PROTOS:
                jar.extract(name, tmp)
        include = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        args = [
            "grpc_tools.protoc",
            f"-I{tmp}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            *PROTOS,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTOS}")
    # The generated modules import each other as top-level names (inference_pb2, google.rpc): the
    # client puts this folder on sys.path. google/ stays a namespace package, merged with protobuf's.
    (out / "__init__.py").touch()
    return out


def main() -> int:
    out = generate()
    print(f"gRPC stubs generated in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
