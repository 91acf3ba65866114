"""Drive an Open Inference Protocol server with `tritonclient` (HTTP and gRPC), a client nobody
here wrote, and report what came back.

tritonclient's gRPC client needs protobuf < 7, which the test venv's pins exclude (requirements.txt:
protobuf 7), so this script runs in the OIP server's venv (.venv-oip, requirements-oip.txt):

    .venv-oip/bin/python tests/support/oip_client.py < calls.json > results.json

calls.json: {"http": "127.0.0.1:P", "grpc": "127.0.0.1:Q", "token": "...", "calls": [call...]},
a call: {"transport": "http"|"grpc", "binary": bool, "model": str, "id": str|null,
"parameters": {...}, "token": bool (default true), "inputs": [{"name", "datatype", "array"}],
"outputs": [names] | null, "headers": {...} (more headers or metadata, e.g. x-request-id),
"parallel": int (send it that many times at once)}; metadata calls send the token too (a door asks
for it on every route; the server itself reads none there); arrays travel as
base64 .npy (`pack`/`unpack`). Each result: {"id", "outputs": {name: array}, "error": null} or
{"error": {"status" | "code", "message"}}; BYTES outputs come back as lists of base64.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np


def pack(array: np.ndarray) -> str:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=array.dtype == object)
    return base64.b64encode(out.getvalue()).decode()


def unpack(text: str) -> np.ndarray:
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=True)


def _call(setup: dict, call: dict) -> dict[str, Any]:
    grpc = call["transport"] == "grpc"
    if grpc:
        import tritonclient.grpc as client
        from tritonclient.utils import InferenceServerException
    else:
        import tritonclient.http as client  # type: ignore[no-redef]
        from tritonclient.utils import InferenceServerException
    url = setup["grpc" if grpc else "http"]
    # gRPC metadata keys are lower-case; HTTP header names are not case-sensitive.
    headers = {"authorization": f"Bearer {setup['token']}"} if call.get("token", True) else {}
    headers |= call.get("headers") or {}
    binary = bool(call.get("binary"))
    inputs = []
    for spec in call["inputs"]:
        array = unpack(spec["array"])
        item = client.InferInput(spec["name"], list(array.shape), spec["datatype"])
        if grpc:
            item.set_data_from_numpy(array)
        else:
            item.set_data_from_numpy(array, binary_data=binary)
        inputs.append(item)
    outputs = None
    if call.get("outputs"):
        outputs = [
            client.InferRequestedOutput(n)
            if grpc
            else client.InferRequestedOutput(n, binary_data=binary)
            for n in call["outputs"]
        ]
    with client.InferenceServerClient(url) as c:
        try:
            kwargs: dict[str, Any] = {
                "inputs": inputs,
                "outputs": outputs,
                "request_id": call.get("id") or "",
                "parameters": call.get("parameters") or None,
                "headers": headers,
            }
            result = c.infer(call["model"], **kwargs)
        except InferenceServerException as e:
            return {
                "error": {
                    "status": e.status(),
                    "message": e.message(),
                    "debug": str(e.debug_details()) if e.debug_details() is not None else None,
                }
            }
    response = result.get_response(as_json=True) if grpc else result.get_response()
    names = [o["name"] for o in response.get("outputs", [])]
    got = {}
    for n in names:
        array = result.as_numpy(n)
        if array.dtype == object:
            array = np.array([base64.b64encode(bytes(x)).decode() for x in array.reshape(-1)])
        got[n] = pack(array)
    return {"id": response.get("id"), "outputs": got, "error": None}


def _metadata(setup: dict, transport: str, model: str) -> dict[str, Any]:
    h = {"authorization": f"Bearer {setup['token']}"} if setup.get("token") else {}
    if transport == "grpc":
        import tritonclient.grpc as gclient

        with gclient.InferenceServerClient(setup["grpc"]) as g:
            return {
                "live": g.is_server_live(headers=h),
                "ready": g.is_server_ready(headers=h),
                "model_ready": g.is_model_ready(model, headers=h),
                "metadata": g.get_model_metadata(model, headers=h, as_json=True),
                "server": g.get_server_metadata(headers=h, as_json=True),
            }
    import tritonclient.http as hclient

    with hclient.InferenceServerClient(setup["http"]) as c:
        return {
            "live": c.is_server_live(headers=h),
            "ready": c.is_server_ready(headers=h),
            "model_ready": c.is_model_ready(model, headers=h),
            "metadata": c.get_model_metadata(model, headers=h),
            "server": c.get_server_metadata(headers=h),
        }


def _unload(setup: dict, transport: str, model: str) -> dict[str, Any]:
    """Ask the server to unload a model (the model repository extension), as tritonclient can."""
    from tritonclient.utils import InferenceServerException

    if transport == "grpc":
        import tritonclient.grpc as client
    else:
        import tritonclient.http as client  # type: ignore[no-redef]
    url = setup[transport]
    headers = {"authorization": f"Bearer {setup['token']}"}
    with client.InferenceServerClient(url) as c:
        try:
            c.unload_model(model, headers=headers)
        except InferenceServerException as e:
            return {"error": {"status": e.status(), "message": e.message()}}
        return {"error": None, "ready_after": c.is_model_ready(model)}


def main() -> int:
    setup = json.load(sys.stdin)
    results: list[Any] = []
    for call in setup.get("calls", []):
        if call.get("unload"):
            results.append(_unload(setup, call["transport"], call["model"]))
            continue
        if call.get("metadata"):
            results.append(_metadata(setup, call["transport"], call["model"]))
            continue
        n = int(call.get("parallel") or 1)
        if n == 1:
            results.append(_call(setup, call))
        else:
            with ThreadPoolExecutor(n) as pool:
                results.append(list(pool.map(_call, [setup] * n, [call] * n)))
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
