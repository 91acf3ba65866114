"""TorchScript + ONNX export of (input_ids, attention_mask) → (logits, features), and the parity gate.

Both are traced at batch 2 × 16 tokens and then checked at batch 1, 7, 32 and lengths 3, 77 and
max_length with random padding: shapes the tracer never saw, so a shape baked into the graph fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from handlers.uncertainty import MLPHead
from training.common.parity import Outputs, ParityCase, check_parity
from training.sentiment.model import SentimentModel

INPUT_NAMES = ["input_ids", "attention_mask"]
OUTPUT_NAMES = ["logits", "features"]
OPSET = 17
TRACE_SHAPE = (2, 16)
PARITY_BATCHES = (1, 7, 32)
# float32 through six transformer layers: TorchScript/ORT fuse and reorder reductions, which moves
# logits by ~1e-6..1e-5; 1e-4 still catches any real divergence (a wrong mask is ~1e-1).
PARITY_ATOL = 1e-4


def example_inputs(
    batch: int, seq: int, vocab_size: int, pad_token_id: int, seed: int
) -> dict[str, np.ndarray]:
    """Random token ids with right padding; row 0 is full length, the rest random lengths >= 2."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, vocab_size, size=(batch, seq), dtype=np.int64)
    lengths = np.r_[seq, rng.integers(min(2, seq), seq + 1, size=batch - 1)]
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    ids[mask == 0] = pad_token_id
    return {"input_ids": ids, "attention_mask": mask}


def parity_cases(max_length: int, vocab_size: int, pad_token_id: int) -> list[ParityCase]:
    seqs = sorted({t for t in (3, 77) if t < max_length} | {max_length})
    return [
        ParityCase(
            f"batch={b} seq={t}", example_inputs(b, t, vocab_size, pad_token_id, seed=b * 1000 + t)
        )
        for b in PARITY_BATCHES
        for t in seqs
    ]


def _as_tensors(inputs: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(inputs["input_ids"]), torch.from_numpy(inputs["attention_mask"])


def export_torchscript(
    model: SentimentModel, path: Path, vocab_size: int, pad_token_id: int
) -> None:
    model.eval()
    example = _as_tensors(example_inputs(*TRACE_SHAPE, vocab_size, pad_token_id, seed=7))
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
    traced.save(str(path))


def export_onnx(model: SentimentModel, path: Path, vocab_size: int, pad_token_id: int) -> None:
    model.eval()
    example = _as_tensors(example_inputs(*TRACE_SHAPE, vocab_size, pad_token_id, seed=7))
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    axes |= {"logits": {0: "batch"}, "features": {0: "batch"}}
    with torch.no_grad():
        # The TorchScript-based exporter: its dynamic_axes handle BERT's sliced position ids
        # without the symbolic-shape constraints the dynamo exporter asks for.
        torch.onnx.export(
            model,
            example,
            str(path),
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def eager_runner(model: SentimentModel):
    def run(inputs: dict[str, np.ndarray]) -> Outputs:
        with torch.inference_mode():
            logits, features = model.eval()(*_as_tensors(inputs))
        return {"logits": logits.numpy(), "features": features.numpy()}

    return run


def torchscript_runner(path: Path):
    module = torch.jit.load(str(path)).eval()

    def run(inputs: dict[str, np.ndarray]) -> Outputs:
        with torch.inference_mode():
            logits, features = module(*_as_tensors(inputs))
        return {"logits": logits.numpy(), "features": features.numpy()}

    return run


def onnx_runner(path: Path, threads: int = 2):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(inputs: dict[str, np.ndarray]) -> Outputs:
        logits, features = session.run(OUTPUT_NAMES, inputs)
        return {"logits": logits, "features": features}

    return run


def head_runner(model: SentimentModel, head: MLPHead):
    """head.npz's deterministic pass over the eager features must give the eager logits."""
    eager = eager_runner(model)

    def run(inputs: dict[str, np.ndarray]) -> Outputs:
        out = eager(inputs)
        return {"logits": head.forward(out["features"]), "features": out["features"]}

    return run


def verify_exports(
    model: SentimentModel,
    out_dir: Path,
    max_length: int,
    vocab_size: int,
    pad_token_id: int,
    threads: int = 2,
    atol: float = PARITY_ATOL,
) -> dict:
    """The gate: model.pt, model.onnx and the numpy head against eager; raises ParityError."""
    runners = {
        "torchscript": torchscript_runner(out_dir / "model.pt"),
        "onnx": onnx_runner(out_dir / "model.onnx", threads),
        "mlp_head": head_runner(model, model.mlp_head()),
    }
    cases = parity_cases(max_length, vocab_size, pad_token_id)
    return check_parity(eager_runner(model), runners, cases, atol)
