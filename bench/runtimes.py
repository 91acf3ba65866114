"""Encoder runtimes for sentiment, chosen by measurement (`make bench-runtimes`).

Three steps, because the candidates live in their own venv (.venv-runtimes) and the gate's
calibration code needs .venv's torch:

1. `prepare` (.venv): tokenizes, as the handler does, real reviews of the held-out test split (the
   timed texts), the selection (validation) split's IMDB reviews (the gate) and a few training
   reviews (NNCF's calibration set), and names the CPU.
1b. `prepare` also builds ONNX Runtime int8 (quantize_encoder) into a temp folder.
2. `measure` (.venv-runtimes): builds OpenVINO f32 / bf16 hint / NNCF int8 from the same model.onnx; times them interleaved round by
   round on the same texts at batch 1 and 8 on `--threads` threads; runs each over the gate's
   reviews one text per call, as served.
3. `report` (.venv): the int8 gate (training.sentiment.quantize.judge) for each candidate against
   fp32, the rule (bench.runtime_choice), reports/runtimes.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BASELINE, FP32 = "onnxruntime-int8", "onnxruntime-fp32"
CT2_NOTE = (
    "CTranslate2 not measured: its converters read Hugging Face / framework checkpoints, not ONNX, "
    "and this export's encoder plus head ships as model.onnx (+ the training checkpoint); a "
    "conversion would need torch and transformers in the runtimes venv and a custom head"
)


def _pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    return ids, mask


def prepare(args) -> int:
    from handlers.kits.text.settings import TextExport
    from handlers.kits.text.tokenize import TextEncoder
    from training.common.machine import cpu_summary, describe_cpu
    from training.common.manifest import read_manifest
    from training.sentiment.data import load_splits

    art = Path(args.artifacts)
    manifest = read_manifest(art)
    export = TextExport.from_block(manifest["handler"])
    enc = TextEncoder(art / export.tokenizer, export.max_length, export.pad_token_id,
                      export.kept_head())  # fmt: skip
    splits = load_splits(0)

    def rows(texts):
        return [enc.encode([t]).input_ids[0].tolist() for t in texts]

    timed = splits.test.sample(args.texts, seed=1)
    sel = splits.validation.take(np.flatnonzero(splits.validation.source == "imdb"))
    if args.selection_limit:
        sel = sel.take(np.arange(min(args.selection_limit, len(sel))))
    calib = splits.train.sample(args.calibration, seed=2)
    from training.sentiment.quantize import quantize_encoder

    int8 = Path(tempfile.mkdtemp(prefix="runtimes-")) / "model.int8.onnx"
    # As the project builds it (the layers its gate kept float), never into artifacts/.
    kept = manifest["metrics"].get("int8", {}).get("float_layers", [])
    quantize_encoder(art / "model.onnx", int8, keep_float=kept)
    cpu = describe_cpu()
    data = {
        "int8": str(int8),
        "cpu": cpu,
        "cpu_summary": cpu_summary(cpu),
        "model": str(art / "model.onnx"),
        "temperature": export.temperature,
        "timed": rows(timed.text),
        "selection": rows(sel.text),
        "selection_labels": np.asarray(sel.label).tolist(),
        "calibration": rows(calib.text),
    }
    Path(args.data).write_text(json.dumps(data))
    print(f"prepared {len(data['timed'])} timed test reviews, {len(sel)} selection IMDB reviews")
    return 0


class _Ort:
    def __init__(self, path: Path, threads: int):
        import onnxruntime as ort

        o = ort.SessionOptions()
        o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
        self.s = ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
        self.info = f"onnxruntime {ort.__version__}"

    def __call__(self, ids, mask):
        return self.s.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]


class _Ov:
    def __init__(self, model, threads: int, precision: str | None):
        import openvino as ov
        import openvino.properties.hint as hints

        core = ov.Core()
        cfg: dict = {"INFERENCE_NUM_THREADS": threads,
                     hints.performance_mode: hints.PerformanceMode.LATENCY}  # fmt: skip
        if precision:
            cfg[hints.inference_precision] = precision
        self.c = core.compile_model(model, "CPU", cfg)
        self.req = self.c.create_infer_request()
        got = self.c.get_property(hints.inference_precision)
        caps = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        self.info = (
            f"openvino {ov.get_version()}; inference precision in effect: {got} "
            f"(CPU capabilities: {' '.join(caps)})"
        )

    def __call__(self, ids, mask):
        out = self.req.infer({"input_ids": ids, "attention_mask": mask})
        return out[self.c.output("logits")]


def _nncf_int8(model_path: Path, calibration: list[list[int]]):
    import nncf
    import openvino as ov

    model = ov.Core().read_model(str(model_path))
    items = [
        dict(zip(("input_ids", "attention_mask"), _pad([r]), strict=True)) for r in calibration
    ]
    return nncf.quantize(model, nncf.Dataset(items), model_type=nncf.ModelType.TRANSFORMER,
                         subset_size=len(items))  # fmt: skip


def measure(args) -> int:
    data = json.loads(Path(args.data).read_text())
    src, threads, int8_path = Path(data["model"]), args.threads, Path(data["int8"])
    runners: dict = {}
    errors: dict[str, str] = {"ctranslate2-int8": CT2_NOTE}
    runners[BASELINE] = _Ort(int8_path, threads)
    runners[FP32] = _Ort(src, threads)
    try:
        runners["openvino-f32"] = _Ov(str(src), threads, "f32")
        runners["openvino-bf16-hint"] = _Ov(str(src), threads, "bf16")
    except Exception as e:  # noqa: BLE001 - a runtime that will not load is a finding
        errors["openvino"] = f"{type(e).__name__}: {e}"
    try:
        t0 = time.perf_counter()
        runners["openvino-nncf-int8"] = _Ov(_nncf_int8(src, data["calibration"]), threads, None)
        errors["nncf-seconds"] = f"{time.perf_counter() - t0:.0f} s to quantize"
    except Exception as e:  # noqa: BLE001
        errors["openvino-nncf-int8"] = f"{type(e).__name__}: {e}"

    timed = data["timed"]
    batches = {1: [[r] for r in timed], 8: [timed[i : i + 8] for i in range(0, len(timed), 8)]}
    for fn in runners.values():  # warm-up: one of each shape class
        for b in (batches[1][0], batches[8][0]):
            fn(*_pad(b))
    times: dict = {n: {b: [] for b in batches} for n in runners}
    for _ in range(args.rounds):
        for b, groups in batches.items():
            for g in groups:
                ids, mask = _pad(g)
                for n, fn in runners.items():  # interleaved: every runtime sees the same load
                    t = time.perf_counter()
                    fn(ids, mask)
                    times[n][b].append(time.perf_counter() - t)
    texts = {1: len(timed), 8: len(timed)}
    speed = {
        n: {
            str(b): {
                "p50_ms": round(statistics.median(ts) * 1e3, 2),
                "texts_per_s": round(texts[b] * args.rounds / sum(ts), 1),
            }
            for b, ts in per.items()
        }
        for n, per in times.items()
    }
    logits = {}
    for n, fn in runners.items():  # the gate's reviews, one per call, as served
        logits[n] = [fn(*_pad([r]))[0].tolist() for r in data["selection"]]
        print(f"{n}: gate logits done", file=sys.stderr)
    out = {
        "speed": speed,
        "info": {n: fn.info for n, fn in runners.items()},
        "notes": errors,
        "logits": logits,
        "threads": threads,
        "rounds": args.rounds,
        "load_average": os.getloadavg(),
    }
    Path(args.measured).write_text(json.dumps(out))
    return 0


def report(args) -> int:
    from bench.runtime_choice import Candidate, choose_runtime
    from training.sentiment.quantize import Int8Gate, gate_metrics, judge

    data = json.loads(Path(args.data).read_text())
    m = json.loads(Path(args.measured).read_text())
    labels, temp = np.asarray(data["selection_labels"]), data["temperature"]
    gate = Int8Gate()
    metrics = {n: gate_metrics(np.asarray(lg), labels, temp) for n, lg in m["logits"].items()}
    fp32_logits = np.asarray(m["logits"][FP32])
    speed, names = m["speed"], list(m["speed"])
    rows, candidates = [], []
    for n in names:
        ratio = {
            b: speed[n][b]["texts_per_s"] / speed[BASELINE][b]["texts_per_s"] for b in ("1", "8")
        }
        ratio_fp32 = {
            b: speed[n][b]["texts_per_s"] / speed[FP32][b]["texts_per_s"] for b in ("1", "8")
        }
        reasons = [] if n == FP32 else judge(metrics[FP32], metrics[n], gate)
        parity = float(np.abs(np.asarray(m["logits"][n]) - fp32_logits).max())
        agree = float((np.asarray(m["logits"][n]).argmax(-1) == fp32_logits.argmax(-1)).mean())
        if n not in (BASELINE, FP32):
            candidates.append(Candidate(n, min(ratio.values()), tuple(reasons)))
        rows.append({"runtime": n, "speed": speed[n], "vs_int8": ratio, "vs_fp32": ratio_fp32,
                     "gate": metrics[n], "refused_because": reasons,
                     "max_abs_logit_diff_vs_fp32": parity, "label_agreement_vs_fp32": agree,
                     "info": m["info"][n]})  # fmt: skip
    choice = choose_runtime(candidates)
    result = {
        "cpu": data["cpu"],
        "cpu_summary": data["cpu_summary"],
        "load_average": m["load_average"],
        "threads": m["threads"],
        "rounds": m["rounds"],
        "timed_texts": f"{len(data['timed'])} held-out test-split reviews, lengths as served",
        "gate_split": f"selection (validation) split, {len(labels)} IMDB reviews",
        "rule": "adopt only >= 1.2x ONNX Runtime int8 (the slower of batch 1 and 8) and through the int8 gate",
        "decision": choice.decision,
        "why": choice.why,
        "notes": m["notes"],
        "runtimes": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runtimes.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Encoder runtimes: sentiment model.onnx on {data['cpu_summary']}",
        "",
        f"{result['timed_texts']}; {m['threads']} threads; {m['rounds']} interleaved rounds; "
        f"load average {', '.join(f'{x:.2f}' for x in m['load_average'])}. Gate: "
        f"{result['gate_split']}.",
        "",
        "| runtime | b1 p50 ms | b1 texts/s | b8 p50 ms | b8 texts/s | vs ORT int8 (b1/b8) "
        "| vs ORT fp32 (b1/b8) | accuracy | ECE | gate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s, g = r["speed"], r["gate"]
        lines.append(
            f"| {r['runtime']} | {s['1']['p50_ms']} | {s['1']['texts_per_s']} | {s['8']['p50_ms']} "
            f"| {s['8']['texts_per_s']} | {r['vs_int8']['1']:.2f}x / {r['vs_int8']['8']:.2f}x "
            f"| {r['vs_fp32']['1']:.2f}x / {r['vs_fp32']['8']:.2f}x | {g['accuracy']:.4f} "
            f"| {g['ece_after']:.4f} | {'; '.join(r['refused_because']) or 'pass'} |"
        )
    lines += ["", f"**Decision: {choice.decision}.**", ""]
    lines += [f"- {n}: {w}" for n, w in choice.why.items()]
    lines += [f"- {n}: {w}" for n, w in m["notes"].items()]
    lines += [f"- {r['runtime']}: {r['info']}" for r in rows]
    (out / "runtimes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.runtimes", description=__doc__)
    sub = p.add_subparsers(dest="step", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("--artifacts", default="artifacts/sentiment")
    a.add_argument("--data", required=True)
    a.add_argument("--texts", type=int, default=32, help="timed test-split reviews")
    a.add_argument("--selection-limit", type=int, default=0, help="0: every IMDB selection review")
    a.add_argument("--calibration", type=int, default=64, help="training reviews for NNCF")
    b = sub.add_parser("measure")
    b.add_argument("--data", required=True)
    b.add_argument("--measured", required=True)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--rounds", type=int, default=3)
    c = sub.add_parser("report")
    c.add_argument("--data", required=True)
    c.add_argument("--measured", required=True)
    c.add_argument("--out", default="reports")
    args = p.parse_args(argv)
    return {"prepare": prepare, "measure": measure, "report": report}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
