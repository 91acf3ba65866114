"""The frontend's ceiling for a model's request and answer sizes: a no-op model
(bench/noop_handler.py) that answers every request with a pre-built answer of the model's own size,
served by the same TorchServe with the model's own model-config (batching, workers, queue), driven
by the same requests as the model, side by side with it. The model's served rate over the no-op's
is the share of the ceiling it reaches: what is left is its own parse, inference and answer.

    build_noop(...)   # before the server starts: the archive, with the model's real answers
    measure(...)      # with both served: rounds of (model, no-op) per body kind and protocol
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOOP_HANDLER = HERE / "noop_handler.py"


def answers(service, payload: dict, model: str) -> dict[str, tuple[bytes, dict]]:
    """The model's own answers to `payload` in process (`service`: a handlers.service.ModelService),
    as a worker returns them: JSON bytes, and float32 bytes with their headers."""
    from bench.served import float32_request
    from handlers.errors import RequestError
    from handlers.service import Request

    raw, headers = float32_request(payload, model)
    out = {}
    for kind, request in (
        ("json", Request(json.dumps(payload).encode(), {"Content-Type": "application/json"})),
        ("float32", Request(raw, headers)),
    ):
        [reply] = service.handle_batch([request])
        if isinstance(reply, RequestError):
            raise reply
        body = reply.body.encode() if isinstance(reply.body, str) else bytes(reply.body)
        out[kind] = (body, dict(reply.headers))
    return out


def model_config(archive: Path) -> bytes:
    """The model-config.yaml an archive carries (batching, workers, queue), as it is."""
    with zipfile.ZipFile(archive) as z:
        manifest = json.loads(z.read("MAR-INF/MANIFEST.json"))
        return z.read(manifest["model"]["configFile"])


def build_noop(
    out: Path, name: str, like: Path, prebuilt: dict[str, tuple[bytes, dict]], workdir: Path
) -> Path:
    """A .mar of the no-op handler answering `prebuilt` (answers()), with the model-config of the
    archive `like`: served exactly as that model is, but with no model."""
    stage = workdir / f"noop-{name}"
    stage.mkdir(parents=True, exist_ok=True)
    (stage / "answer.json").write_bytes(prebuilt["json"][0])
    (stage / "answer.f32").write_bytes(prebuilt["float32"][0])
    (stage / "answer.headers.json").write_text(json.dumps(prebuilt["float32"][1]))
    (stage / "model-config.yaml").write_bytes(model_config(like))
    (stage / "tmp").mkdir(exist_ok=True)
    extra = ",".join(str(stage / f) for f in ("answer.json", "answer.f32", "answer.headers.json"))
    cmd = [
        str(Path(sys.executable).with_name("torch-model-archiver")),
        "--model-name", name,
        "--version", "1",
        "--handler", str(NOOP_HANDLER),
        "--extra-files", extra,
        "--config-file", str(stage / "model-config.yaml"),
        "--export-path", str(out),
        "--force",
    ]  # fmt: skip
    # The archiver wipes $TMPDIR/<model-name>: a private TMPDIR keeps parallel builds apart.
    env = os.environ | {"TMPDIR": str(stage / "tmp")}
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    return out / f"{name}.mar"


def measure(
    load,
    model: str,
    archive: str,
    noop: str,
    payloads: list[dict],
    clients: int,
    kinds: list[tuple[str, str]],
    rounds: int = 2,
) -> dict:
    """For each (body, protocol) in `kinds`: `rounds` rounds of the model's served load then the
    no-op's (`load(archive, payloads, clients, protocol, body, codec_model)` → a served level), each
    the best of its rounds; the ratio model / no-op. → the report's `noop_ceiling` section."""
    from training.common.machine import cpu_summary, describe_cpu

    rows = []
    for body, proto in kinds:
        runs: dict[str, list[dict]] = {"model": [], "noop": []}
        for _ in range(rounds):
            runs["model"].append(load(archive, payloads, clients, proto, body, model))
            runs["noop"].append(load(noop, payloads, clients, proto, body, model))
        best = {k: max(v, key=lambda s: s["rps"]) for k, v in runs.items()}
        ceiling = best["noop"]["rps"]
        rows.append(
            {
                "body": body,
                "protocol": proto,
                "model_rps": round(best["model"]["rps"], 2),
                "noop_rps": round(ceiling, 2),
                "ratio": round(best["model"]["rps"] / ceiling, 3) if ceiling else None,
                "model_p50_ms": round(best["model"]["p50_ms"], 2),
                "noop_p50_ms": round(best["noop"]["p50_ms"], 2),
                "errors": sum(s["errors"] for v in runs.values() for s in v),
                "refused": sum(s["refused"] for v in runs.values() for s in v),
                "rounds": {k: [round(s["rps"], 2) for s in v] for k, v in runs.items()},
            }
        )
    cpu = describe_cpu()
    return {
        "model": model,
        "archive": archive,
        "cpu": cpu,
        "cpu_summary": cpu_summary(cpu),
        "load_average_1m": os.getloadavg()[0],
        "clients": clients,
        "requests": len(payloads),
        "rows": rows,
    }


def markdown(section: dict) -> list[str]:
    """The report's table: the model's served rate beside the no-op's, per body and protocol."""
    lines = [
        "## The serving ceiling: the model against a no-op of the same sizes",
        "",
        f"{section['model']} ({section['archive']}) on {section['cpu_summary']} (load average "
        f"{section['load_average_1m']:.1f} at the end): {section['clients']} closed-loop clients, "
        f"{section['requests']} requests a round, best of each; the no-op model (bench/noop_handler.py) "
        "answers the model's own answer, pre-built, with the model's model-config, in the same "
        "TorchServe: its rate is the frontend's ceiling for these sizes.",
        "",
        "| body | protocol | model req/s | no-op req/s | model / ceiling | model p50 ms | no-op p50 ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in section["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(
            f"| {r['body']} | {r['protocol'].upper()} | {r['model_rps']:.1f} | {r['noop_rps']:.1f} "
            f"| {ratio} | {r['model_p50_ms']:.1f} | {r['noop_p50_ms']:.1f} |"
        )
    return [*lines, ""]


def in_process_service(model: str, artifacts: Path, runtime: str, overrides: dict | None = None):
    """The model's ModelService in this process, as the bench's handler-path timing loads it."""
    from bench.inprocess import bench_parts, serving_shape
    from handlers.service import ModelService
    from tools import registry

    _, handler = serving_shape(model, overrides)
    parts = bench_parts(model)
    load = (parts.load if parts is not None else None) or registry.get(model).spec().model.load
    return ModelService(load(artifacts, handler | {"runtime": runtime}))


def failures(sections: list[dict]) -> list[str]:
    """A ceiling row whose calls failed (refusals as overloaded are not failures)."""
    return [
        f"ceiling {s['archive']} {r['body']} {r['protocol']}: {r['errors']} calls failed"
        for s in sections
        for r in s["rows"]
        if r["errors"]
    ]
