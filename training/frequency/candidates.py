"""Several seeds trained side by side, the best on the validation signals kept.

One run's result can hinge on float rounding, and which run falls short differs between machines,
so the pipeline trains `cfg.candidates` (one seed each) in waves: as many candidates at once as
the cores hold at `cfg.threads` threads each (one process per candidate; they share nothing but
the read-only training signals), and no further wave once a candidate meets the floors on the
validation signals (held-out served-family signals of `cfg.val_seed`; training/frequency/quality.py).
Each is scored by its worst figure in either mode (`validation_score`); the lowest score trained is
kept, and the floors are then checked on the test signals before anything is exported
(training/frequency/__main__.py). On two cores at two threads a wave is one candidate: the first
seed that meets the floors is the model, the next seed trains only when it does not.

Each candidate logs to `<out>/candidates/seed-<k>/` (Lightning CSV: train_mse, val_mse) and keeps
its checkpoints there (`--resume` continues every candidate). The per-step curves go to MLflow
afterwards from those files: the kept candidate's under the usual names, every candidate's under
`candidates.seed-<k>.<metric>`; live logging from several processes would share one SQLite store.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback
from tqdm import tqdm

from training.common.trainer import TrainerOptions
from training.frequency.config import TrainConfig
from training.frequency.model import FrequencyLSTM
from training.frequency.quality import MODES, figures, quality

VALIDATION_SIGNALS = 32
"""Held-out served-family signals of the validation seed each candidate is scored on."""

WEIGHTS = "weights.pt"
LOG_DIR = "log"


@dataclass(frozen=True)
class Candidate:
    seed: int
    steps: int
    """Optimizer steps taken (fewer than cfg.steps when early stopping fired)."""
    seconds: float
    validation: dict
    """`quality.quality` on the validation signals: both modes' figures."""
    root: Path

    @property
    def score(self) -> float:
        return validation_score(self.validation)

    def summary(self) -> dict:
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 1),
            "validation_score": self.score,
            "validation": figures(self.validation),
        }

    def meets(self, cfg: TrainConfig) -> bool:
        # The extraction's floors; the band's are held after its factors are fitted on the kept one.
        f = figures(self.validation)
        return not any(floor.missed(f[floor.figure]) for floor in cfg.floors if floor.figure in f)


def validation_score(report: dict) -> float:
    """The worst of either mode's 1 - p10 r and absent ratio: lower is better."""
    return max(max(1.0 - report[m]["p10_r"], report[m]["absent_ratio"]) for m in MODES)


def candidate_dir(out: Path, seed: int) -> Path:
    return Path(out) / "candidates" / f"seed-{seed}"


class _Count(Callback):
    """Adds each optimizer step to a counter the parent's progress bar reads."""

    def __init__(self, counter) -> None:
        self.counter = counter

    def on_train_batch_end(self, *args) -> None:
        with self.counter.get_lock():
            self.counter.value += 1


_COUNTER = None


def _init_worker(counter, threads: int) -> None:
    global _COUNTER
    _COUNTER = counter
    torch.set_num_threads(threads)


def train_candidate(
    cfg: TrainConfig, seed: int, opts: TrainerOptions, root: Path, progress: bool = False
) -> Candidate:
    """Train one seed into `root` (checkpoints, CSV log, weights) and score it."""
    from lightning.pytorch.loggers import CSVLogger

    from training.frequency.train import train, train_signals

    started = time.perf_counter()
    cfg = dataclasses.replace(cfg, torch_seed=seed)
    root.mkdir(parents=True, exist_ok=True)
    if not opts.resume:  # a fresh run's curves only (a resumed one appends to its log)
        shutil.rmtree(root / LOG_DIR, ignore_errors=True)
    logger = CSVLogger(root, name="", version=LOG_DIR)
    callbacks = [_Count(_COUNTER)] if _COUNTER is not None else []
    model, steps = train(cfg, train_signals(cfg), opts, root, logger, progress, callbacks)
    torch.save(model.state_dict(), root / WEIGHTS)
    validation = quality(model, cfg, seed=cfg.val_seed, count=VALIDATION_SIGNALS)
    return Candidate(seed, steps, time.perf_counter() - started, validation, root)


def _cores() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def default_jobs(candidates: int, threads: int) -> int:
    """Candidates trained at once: one per `threads` cores this process may use."""
    return max(1, min(candidates, _cores() // max(threads, 1)))


def train_candidates(
    cfg: TrainConfig,
    opts: TrainerOptions,
    out: Path,
    progress: bool = True,
    jobs: int | None = None,
    threads: int | None = None,
) -> list[Candidate]:
    """The seeds of `cfg.candidates` in waves of `jobs` (default: one per `threads` cores;
    `threads` defaults to `cfg.threads`, at most the cores), stopping after the first wave that
    holds a candidate that meets the floors on the validation signals. A wave
    of one trains in this process, a larger one in spawned processes of `threads` threads each."""
    seeds = _seeds(cfg)
    threads = max(1, min(threads or cfg.threads, _cores()))
    jobs = max(1, jobs or default_jobs(len(seeds), threads))
    results: list[Candidate] = []
    for start in range(0, len(seeds), jobs):
        wave = seeds[start : start + jobs]
        if len(wave) == 1:
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                seed = wave[0]
                results.append(train_candidate(cfg, seed, opts, candidate_dir(out, seed), progress))
            finally:
                torch.set_num_threads(before)
        else:
            results += _train_side_by_side(cfg, wave, opts, out, progress, threads)
        if any(c.meets(cfg) for c in results):
            break
    return results


def _train_side_by_side(
    cfg: TrainConfig,
    seeds: list[int],
    opts: TrainerOptions,
    out: Path,
    progress: bool,
    threads: int,
) -> list[Candidate]:
    ctx = get_context("spawn")  # no fork of a process that may hold threads or a CUDA context
    counter = ctx.Value("l", 0)
    bar = tqdm(total=len(seeds) * cfg.steps, desc=f"frequency: seeds {seeds} side by side",
               unit="step", disable=not progress)  # fmt: skip
    with ProcessPoolExecutor(len(seeds), ctx, _init_worker, (counter, threads)) as pool:
        futures = [pool.submit(train_candidate, cfg, s, opts, candidate_dir(out, s)) for s in seeds]
        while not all(f.done() for f in futures):
            time.sleep(0.5)
            bar.update(counter.value - bar.n)
        results = [f.result() for f in futures]  # a candidate's exception is raised here
    bar.update(counter.value - bar.n)
    bar.close()
    return results


def untrained(candidates: list[Candidate], cfg: TrainConfig) -> list[int]:
    """Seeds of the config a wave before them made unnecessary."""
    trained = {c.seed for c in candidates}
    return [s for s in _seeds(cfg) if s not in trained]


def _seeds(cfg: TrainConfig) -> list[int]:
    return list(dict.fromkeys(cfg.candidates or (cfg.torch_seed,)))


def select(candidates: list[Candidate], cfg: TrainConfig) -> Candidate:
    """The lowest validation score (the floors are checked on the test signals afterwards)."""
    return min(candidates, key=lambda c: (c.score, c.seed))


def load_model(candidate: Candidate, cfg: TrainConfig) -> FrequencyLSTM:
    from training.frequency.train import build_model

    model = build_model(cfg)  # the architecture; the weights are the candidate's
    model.load_state_dict(torch.load(candidate.root / WEIGHTS, weights_only=True))
    return model.eval()


def history(candidate: Candidate) -> Iterator[tuple[str, float, int]]:
    """(metric, value, step) rows of the candidate's CSV log."""
    path = candidate.root / LOG_DIR / "metrics.csv"
    if not path.is_file():
        return
    with path.open() as f:
        for row in csv.DictReader(f):
            step = int(row.get("step") or 0)
            for key, value in row.items():
                if key not in ("step", "epoch") and value not in ("", None):
                    yield key, float(value), step
