"""Keep freed memory in the worker's heap instead of handing it back to the kernel after every
batch.

A batch of the frequency model allocates and frees arrays of a few MB each (windows x samples in
float64). glibc's malloc serves blocks that large with mmap, or trims them off the top of the
heap when freed, so the next batch gets fresh pages from the kernel and faults on every one of
them (tests/unit/test_heap.py counts the faults). Raising malloc's mmap and trim thresholds keeps
those blocks in the heap, reused batch after batch; the process keeps its peak heap instead of
returning it (bounded by the largest batch the work budget admits, tens of MB). Answers do not
change: where memory comes from never changes a number.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameters (malloc.h)."""

MMAP_THRESHOLD = 32 * 1024 * 1024
"""Blocks under this come from the heap (32 MB: glibc's largest heap-served size on 64-bit)."""
TRIM_THRESHOLD = 128 * 1024 * 1024
"""Free memory at the heap's top past this goes back to the kernel."""


@functools.cache
def keep_freed_memory() -> bool:
    """Set the thresholds once per process; False where the C library is not glibc (nothing is
    changed there)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success; setting either turns off glibc's dynamic thresholds.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
