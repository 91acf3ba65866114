"""GPU checks and in-process GPU bench on a bare CUDA machine: only the repository and whatever
Python packages are installed there (no venv, no network, no trained weights).

For the model that declares an fp16 gate (`fp16_atol()` in its samples.py; --model, default the
first registered that has one), a randomly initialised encoder of MiniLM-L6's shape (6 layers, 384 wide, 12 heads) stands in for
the trained one: throughput does not depend on the weights, and parity is checked against the same
model's eager float32 output. It is a BERT from `transformers` when that is installed, otherwise a
plain torch TransformerEncoder of the same size. Checks:

0. A GPU replica's worker (`TS_REQUIRE_GPU=1`) resolves TorchServe's gpu_id 0 to cuda:0, and refuses
   a gpu_id past the devices torch sees (the unit tests fake CUDA; here it is real).
1. The TorchScript traced on the CPU, as `make train` exports it (training/sentiment/masking.py's
   ready mask), runs on cuda:0 through handlers.runtime.TorchScriptRuntime and matches eager CPU
   fp32; a trace made with transformers' own mask code (exports before it) is refused at load.
2. fp16 (autocast) passes the serving fp16 gate (same labels, |diff| <= fp16_atol).
3. ONNX Runtime: the CUDA provider is in use, or the worker's load-time refusal is shown.
4. In-process throughput at batch 1/8/32 × 256 tokens for each runtime that works.
5. With --artifacts DIR (holding <model>/manifest.json: `make train`'s, or the tiny config's, which
   is small enough to carry to a bare machine): the model's whole served path (handlers/service.py:
   parse, predictor, reply) on cuda:0 with its exported TorchScript, fp32 and fp16, answers the
   same texts as the same path on the CPU.

    PYTHONPATH=. python3 bench/gpu_check.py --out reports/gpu     (bench/gpu_check.sh wraps it)
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch
from torch import nn

from handlers.errors import ArchiveError
from handlers.runtime import (
    REQUIRE_GPU_ENV,
    OnnxRuntime,
    TorchScriptRuntime,
    device_from_properties,
)
from tools.registry import MODELS, get
from training.sentiment.masking import additive_mask  # torch only: no training stack needed

IN, OUT = ("input_ids", "attention_mask"), ("logits", "features")
REVIEWS = (
    "A quietly moving film with a fine cast.",
    "Dull, overlong and badly acted; I wanted my evening back.",
    "The first hour drags, but the ending is one of the best I have seen in years, and the lead "
    "carries every scene she is in with a warmth the script does not deserve.",
    "Not bad.",
)
"""Texts the served path answers on the CPU and on the GPU (check 5): short, long, mixed."""
VOCAB, HIDDEN, LAYERS, HEADS, FF = 30522, 384, 6, 12, 1536
GATED = [m.name for m in MODELS if m.samples().fp16_atol]
"""The models whose samples.py states their serving fp16 gate."""


class PlainEncoder(nn.Module):
    """MiniLM-shaped encoder from torch alone, when transformers is not installed."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(512, HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, FF, batch_first=True, activation="gelu")
        self.layers = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        # Positions as a buffer (it moves with the module): an arange made in forward would be
        # traced with the CPU as a literal device.
        self.register_buffer("positions", torch.arange(512), persistent=False)

    def forward(self, ids, mask):
        pos = self.positions[: ids.shape[1]].unsqueeze(0)
        return self.layers(self.tok(ids) + self.pos(pos), src_key_padding_mask=mask == 0)


class Model(nn.Module):
    """(input_ids, attention_mask) → (logits, features), like the gated model's training package."""

    def __init__(self, encoder: nn.Module, hf: bool, ready_mask: bool = True):
        super().__init__()
        self.encoder, self.hf, self.ready_mask = encoder, hf, ready_mask
        self.head = nn.Sequential(
            nn.Linear(HIDDEN, 256), nn.GELU(approximate="tanh"), nn.Linear(256, 2)
        )

    def forward(self, ids, mask):
        if self.hf:
            # As training's model: a ready 4D mask, so a CPU trace names no device.
            # ready_mask=False is the export before it (transformers' own mask code).
            m4 = additive_mask(mask) if self.ready_mask else mask
            hidden = self.encoder(input_ids=ids, attention_mask=m4).last_hidden_state
        else:
            hidden = self.encoder(ids, mask)
        m = mask.unsqueeze(-1).to(hidden.dtype)
        features = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(features), features


def build_model() -> tuple[nn.Module, str]:
    torch.manual_seed(0)
    try:
        from transformers import BertConfig, BertModel

        cfg = BertConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, intermediate_size=FF, max_position_embeddings=512,
        )  # fmt: skip
        try:
            enc = BertModel(cfg, add_pooling_layer=False, attn_implementation="eager")
        except TypeError:
            cfg._attn_implementation = "eager"
            enc = BertModel(cfg, add_pooling_layer=False)
        import transformers

        return Model(
            enc, True
        ).eval(), f"transformers {transformers.__version__} BertModel (random)"
    except ImportError as e:
        return Model(PlainEncoder(), False).eval(), f"torch TransformerEncoder (random; {e})"


def inputs(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, VOCAB, size=(batch, seq), dtype=np.int64)
    lengths = np.r_[seq, rng.integers(2, seq + 1, size=batch - 1)]
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def eager(model, feed) -> dict[str, np.ndarray]:
    with torch.inference_mode():
        out = model(*(torch.from_numpy(feed[n]) for n in IN))
    return {n: t.numpy() for n, t in zip(OUT, out, strict=True)}


def max_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[n] - b[n]))) for n in OUT)


def throughput(run, batch: int, seq: int, min_seconds: float) -> float:
    feed = inputs(batch, seq, seed=batch)
    for _ in range(5):
        run(
            feed
        )  # warm-up: TorchScript's profiling runs, CUDA context, cuDNN/cuBLAS plans, ORT memory arena
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        run(feed)  # returns numpy: the device is synchronised on every call, as a worker is
        done += batch
    return done / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, default=Path("reports/gpu"))
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--min-seconds", type=float, default=2.0)
    p.add_argument("--model", choices=GATED, default=GATED[0] if GATED else None)
    p.add_argument("--artifacts", type=Path, help="holds <model>/manifest.json: check 5")
    args = p.parse_args(argv)
    fp16_atol = get(args.model).samples().fp16_atol()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "checks": {},
        "bench": [],
    }
    checks = report["checks"]
    if torch.cuda.is_available():
        report["gpu"] = torch.cuda.get_device_name(0)
        report["torch_cuda"] = torch.version.cuda
    try:
        import onnxruntime as ort

        report["onnxruntime"] = ort.__version__
        report["ort_available_providers"] = ort.get_available_providers()
    except ImportError as e:
        ort, report["onnxruntime"] = None, f"not installed ({e})"
    model, report["model"] = build_model()
    print(json.dumps({k: v for k, v in report.items() if k not in ("checks", "bench")}, indent=2))
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch: nothing to check on a GPU", file=sys.stderr)

    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    probe = inputs(8, 77, seed=1)
    want = eager(model, probe)
    example = tuple(torch.from_numpy(inputs(2, 16, seed=7)[n]) for n in IN)
    # Traced here, on the CPU, as `make train` exports: with the ready 4D mask it names no device
    # and must run on the GPU. The export from before that mask (transformers' mask code, which
    # a trace records with the CPU as a literal device) must be refused there at load.
    with torch.no_grad():
        torch.jit.trace(model, example, check_trace=False).save(str(work / "model.pt"))
        if getattr(model, "hf", False):
            before = copy.deepcopy(model)
            before.ready_mask = False
            torch.jit.trace(before, example, check_trace=False).save(str(work / "before.pt"))
    runners: dict = {}
    device = "cuda:0" if torch.cuda.is_available() else "cpu"

    def check(name: str, fn) -> None:
        try:
            checks[name] = fn()
        except Exception as e:  # why: one failed check must not hide the others
            checks[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            traceback.print_exc()
        print(f"[{name}] {json.dumps(checks[name])}", flush=True)

    cpu_trace = work / "model.pt"

    def gpu_replica_device():
        env = {REQUIRE_GPU_ENV: "1"}
        got = device_from_properties({"gpu_id": "0"}, env)
        try:
            past = device_from_properties({"gpu_id": str(torch.cuda.device_count())}, env)
        except ArchiveError as e:
            past = f"refused: {e}"
        return {
            "ok": got == "cuda:0" and past.startswith("refused"),
            "gpu_id_0": got,
            "gpu_id_past_the_devices": past,
        }

    def cpu_trace_before_refused():
        if not (work / "before.pt").exists():
            return {"ok": True, "skipped": "no transformers encoder here"}
        try:
            TorchScriptRuntime(work / "before.pt", IN, OUT, device=device)
        except ArchiveError as e:
            return {"ok": "traced on the CPU" in str(e), "refused_at_load": str(e)}
        return {"ok": device == "cpu", "refused_at_load": None}

    def ts_fp32():
        rt = TorchScriptRuntime(cpu_trace, IN, OUT, device=device)
        runners[f"torchscript fp32 {device}"] = rt.run
        on = next(rt._module.parameters()).device
        diff = max_diff(want, rt.run(probe))
        return {
            "ok": on.type == "cuda" and diff < 1e-2,
            "param_device": str(on),
            "max_abs_diff_vs_cpu_eager": diff,
        }

    def ts_fp16():
        fp32 = TorchScriptRuntime(cpu_trace, IN, OUT, device=device)
        rt = TorchScriptRuntime(cpu_trace, IN, OUT, device=device, fp16=True)
        a, b = fp32.run(probe), rt.run(probe)
        diff = max_diff(a, b)
        same = bool(np.array_equal(a["logits"].argmax(-1), b["logits"].argmax(-1)))
        runners[f"torchscript fp16 {device}"] = rt.run
        return {
            "ok": diff <= fp16_atol and same,
            "max_abs_diff_vs_fp32": diff,
            "same_labels": same,
            "gate_atol": fp16_atol,
        }

    def onnx_cuda():
        if ort is None:
            return {"ok": False, "error": "onnxruntime not installed"}
        axes = {n: {0: "b", 1: "t"} for n in IN} | {n: {0: "b"} for n in OUT}
        with torch.no_grad():
            # The TorchScript-based exporter (as training does); older torch has no `dynamo` switch.
            params = inspect.signature(torch.onnx.export).parameters
            kw = {"dynamo": False} if "dynamo" in params else {}
            torch.onnx.export(model, example, str(work / "model.onnx"), input_names=list(IN),
                              output_names=list(OUT), dynamic_axes=axes, opset_version=17, **kw)  # fmt: skip
        try:
            rt = OnnxRuntime(work / "model.onnx", IN, OUT, device=device)
        except ArchiveError as e:
            return {"ok": False, "refused_at_load": str(e)}
        runners[f"onnxruntime {','.join(p[:-17] for p in rt.providers)}"] = rt.run
        diff = max_diff(want, rt.run(probe))
        return {
            "ok": "CUDAExecutionProvider" in rt.providers and diff < 1e-2,
            "providers": list(rt.providers),
            "max_abs_diff_vs_cpu_eager": diff,
        }

    def served_on_gpu(fp16: bool):
        from handlers.service import ModelService, Request

        spec = get(args.model)
        from handlers.archive import ArchiveConfig

        config = dict(ArchiveConfig.read(spec.model_config.parent).handler)
        config = config | {"runtime": "torchscript"}
        load = spec.spec().model.load
        art = args.artifacts / args.model
        cpu = ModelService(load(art, config, "cpu"))
        gpu = ModelService(load(art, config | {"fp16": fp16}, device))
        bodies = [{"text": t} for t in REVIEWS] + [{"texts": list(REVIEWS)}]
        requests = [Request(json.dumps(b).encode(), media_type="application/json") for b in bodies]

        def answers(service: ModelService) -> list[dict]:
            """One answer per text: a {"texts": [...]} request's list is flattened."""
            out = [json.loads(r.body) for r in service.handle_batch(requests)]  # type: ignore[union-attr]
            return [x for ans in out for x in (ans if isinstance(ans, list) else [ans])]

        flat, got = answers(cpu), answers(gpu)
        diff = max(
            abs(x["probabilities"][k] - y["probabilities"][k])
            for x, y in zip(flat, got, strict=True)
            for k in x["probabilities"]
        )
        same = [x["label"] for x in flat] == [y["label"] for y in got]
        limit = 0.02 if fp16 else 1e-4
        return {
            "ok": same and diff <= limit and gpu.model.predictor.runtime.device == device,
            "answers": len(got),
            "same_labels": same,
            "max_probability_diff_vs_cpu": diff,
            "limit": limit,
            "device": gpu.model.predictor.runtime.device,
        }

    check("gpu_replica_device", gpu_replica_device)
    check("cpu_trace_before_ready_mask_refused_on_gpu", cpu_trace_before_refused)
    check("cpu_traced_torchscript_on_gpu", ts_fp32)
    check("fp16_gate", ts_fp16)
    check("onnxruntime_cuda_provider", onnx_cuda)
    if args.artifacts is not None:
        check("served_path_on_gpu_fp32", lambda: served_on_gpu(False))
        check("served_path_on_gpu_fp16", lambda: served_on_gpu(True))

    for name, run in runners.items():
        for b in (int(x) for x in args.batches.split(",")):
            try:
                rps = throughput(run, b, args.seq, args.min_seconds)
            except Exception as e:  # e.g. out of memory at a large batch
                rps = None
                print(f"bench {name} batch {b}: {type(e).__name__}: {e}", file=sys.stderr)
            report["bench"].append({"runtime": name, "batch": b, "seq": args.seq, "rps": rps})
            print(
                f"bench {name:32s} batch {b:3d} x {args.seq}: {rps or float('nan'):9.1f} seq/s",
                flush=True,
            )

    lines = [
        f"# GPU check: {report.get('gpu', 'no GPU')} (torch {report['torch']}, CUDA {report.get('torch_cuda')}, "
        f"onnxruntime {report['onnxruntime']}, Python {report['python']})",
        "",
        f"Model: {report['model']}, MiniLM-L6 shape. Random weights: figures are throughput, not accuracy.",
        "",
        "| check | ok | details |",
        "|---|---|---|",
        *(
            f"| {k} | {v.get('ok')} | {json.dumps({x: y for x, y in v.items() if x != 'ok'})} |"
            for k, v in checks.items()
        ),
        "",
        f"In-process throughput, sequences/s at {args.seq} tokens (row 0 full length, others random lengths):",
        "",
        "| runtime | batch | seq/s |",
        "|---|---:|---:|",
        *(
            f"| {r['runtime']} | {r['batch']} | {r['rps'] or float('nan'):.1f} |"
            for r in report["bench"]
        ),
        "",
    ]
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    (args.out / "gpu_check.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if checks and all(c.get("ok") for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
