"""The Lightning `Trainer` both models train with, and the command-line flags that shape it.

Device choice is Lightning's own: `--accelerator auto` takes CUDA, then MPS, then the CPU. Mixed
precision is on by default on a GPU (bf16 where the card has it, else fp16 with a loss scaler), and
on a CPU only for a model that asks for it (`cpu_bf16`, in its own training code) and only where the CPU computes
bfloat16 natively; elsewhere it would be emulated and slower. Other models train in float32.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, TQDMProgressBar

ACCELERATORS = ("auto", "cpu", "cuda", "gpu", "mps")


@dataclass(frozen=True)
class TrainerOptions:
    accelerator: str = "auto"
    """auto | cpu | cuda | gpu | mps (auto: CUDA, then MPS, then CPU)."""
    devices: str = "auto"
    """One device: auto or 1 (the first), or an index followed by a comma (2,)."""
    resume: bool = False
    """Continue from <out>/checkpoints/last.ckpt when it exists."""
    checkpoint_every: int = 200
    """Optimizer steps between checkpoints (last.ckpt is overwritten each time)."""
    precision: str | None = None
    """None: 16/bf16-mixed on CUDA, 32 elsewhere; or any Lightning precision string."""


def add_trainer_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--accelerator", choices=ACCELERATORS, default="auto",
                        help="where to train (auto: CUDA, then MPS, then CPU)")  # fmt: skip
    parser.add_argument("--devices", default="auto", type=_checked_devices,
                        help="one device: auto or 1 (the first), or an index like 2,")  # fmt: skip
    parser.add_argument("--resume", action="store_true",
                        help="continue from OUT/checkpoints/last.ckpt if a run was interrupted")  # fmt: skip
    parser.add_argument("--precision", default=None,
                        help="override: 32-true, 16-mixed, bf16-mixed (default: mixed on CUDA, bf16-mixed on a CPU with native bf16 for a model that asks)")  # fmt: skip


def _checked_devices(value: str) -> str:
    try:
        _devices(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def trainer_options(args: argparse.Namespace) -> TrainerOptions:
    return TrainerOptions(args.accelerator, args.devices, args.resume, precision=args.precision)


def _devices(value: str):
    """One device: `auto`/`1` (the first), or `k,` (device index k). Several would each run the whole
    pipeline (export, parity, registration) and train the same unsharded batch plan: refused."""
    if value in ("auto", "1"):
        return 1
    if "," in value:
        ids = [int(v) for v in value.split(",") if v.strip()]
        if len(ids) == 1:
            return ids
    raise ValueError(
        f"--devices {value!r}: training uses one device (auto, 1, or an index like 2,)"
    )


def resolved_accelerator(accelerator: str) -> str:
    """What `auto` becomes here: cuda, mps or cpu."""
    if accelerator != "auto":
        return "cuda" if accelerator == "gpu" else accelerator
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 matmuls natively here (AVX512-BF16 or AMX): only then is CPU
    autocast faster than float32 (1.8x for a MiniLM training step on this project's AMD EPYC);
    without it bfloat16 is emulated and slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def precision_for(opts: TrainerOptions, cpu_bf16: bool = False) -> str:
    """The Trainer precision: `--precision` if given, else mixed on CUDA (bf16 where the card has
    it, else fp16), bf16-mixed on a CPU with native bf16 when the model asks for it (`cpu_bf16`),
    else 32-true. Exports and evaluation always run in float32, whatever training used."""
    if opts.precision:
        return opts.precision
    accelerator = resolved_accelerator(opts.accelerator)
    if accelerator == "cuda":
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    if accelerator == "cpu" and cpu_bf16 and cpu_has_native_bf16():
        return "bf16-mixed"
    return "32-true"


def checkpoint_path(out: Path, opts: TrainerOptions) -> str | None:
    """The checkpoint `fit` resumes from, or None for a fresh run."""
    last = Path(out) / "checkpoints" / "last.ckpt"
    return str(last) if opts.resume and last.is_file() else None


def build_trainer(
    opts: TrainerOptions,
    out: Path,
    *,
    max_steps: int,
    progress: bool,
    logger=None,
    callbacks: list[Callback] | None = None,
    gradient_clip_val: float | None = None,
    val_check_interval: int | None = None,
    cpu_bf16: bool = False,
) -> L.Trainer:
    checkpoints = ModelCheckpoint(
        dirpath=Path(out) / "checkpoints",
        every_n_train_steps=opts.checkpoint_every,
        save_top_k=0,
        save_last=True,
        save_on_exception=True,
    )
    extra = [TQDMProgressBar(refresh_rate=10)] if progress else []
    return L.Trainer(
        accelerator=opts.accelerator,
        devices=_devices(opts.devices),
        precision=precision_for(opts, cpu_bf16),  # type: ignore[arg-type]  # one of Lightning's literals
        max_steps=max_steps,
        max_epochs=-1,
        logger=logger if logger is not None else False,
        callbacks=[checkpoints, *extra, *(callbacks or [])],
        enable_progress_bar=progress,
        enable_model_summary=False,
        gradient_clip_val=gradient_clip_val,
        val_check_interval=val_check_interval,
        check_val_every_n_epoch=None if val_check_interval else 1,
        num_sanity_val_steps=0,
        log_every_n_steps=max(1, min(10, max_steps // 4)),  # tiny runs log every step
        # Batches are planned by the training code (length buckets, carried streams): a
        # distributed sampler would reshuffle them.
        use_distributed_sampler=False,
        deterministic=False,
    )
