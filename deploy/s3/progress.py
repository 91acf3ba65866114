"""tqdm progress for s3transfer uploads and downloads (its callbacks come from worker threads)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from s3transfer.subscribers import BaseSubscriber
from tqdm import tqdm


class ProgressSubscriber(BaseSubscriber):
    def __init__(self, bar: tqdm):
        self._bar = bar

    def on_progress(self, future, bytes_transferred: int, **kwargs) -> None:
        self._bar.update(bytes_transferred)


@contextlib.contextmanager
def transfer_bar(total: int, desc: str, enabled: bool = True) -> Iterator[tqdm]:
    with tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=not enabled,
        file=sys.stderr,
    ) as bar:
        yield bar
