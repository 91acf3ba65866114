"""handlers/heap.keep_freed_memory: a batch's MB-sized arrays come back from the heap on the next
batch instead of from the kernel (no page fault for each of their pages). Each side runs in a
fresh interpreter, so pytest's own heap and thresholds play no part."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from handlers.heap import keep_freed_memory
    assert keep_freed_memory()
def batch():  # what a frequency batch allocates: rows x 2,000 samples of float64, then frees
    rows = [np.ones((64, 2000)) for _ in range(6)]
    both = np.concatenate(rows)
    return float((both * 2.0).sum())
batch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    batch()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def faults_per_batch(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", WORKLOAD, mode], cwd=ROOT, capture_output=True, text=True,
        check=True, env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_freed_batches_come_back_without_page_faults():
    kept, default = faults_per_batch("keep"), faults_per_batch("none")
    # 8 MB a batch is ~2,000 pages: glibc's defaults fault on most of them every batch.
    assert default > 500
    assert kept < 50
