"""Many clients' requests → the model's batched call, as TorchServe batches them.

Each model has `workers` threads, each with its own `ModelService` (its own runtime session and
core slots, as TorchServe's worker processes have). A worker takes the first waiting request,
then whatever else is queued, up to `batch_size`, waiting at most `max_delay_s` for more (the
archive's batchSize and maxBatchDelay), and answers the whole batch with one `handle_batch`, each
answer written by `write` (the contract's tensors) in the worker, or as its Reply. At most
`queue_size` requests wait (the archive's jobQueueSize): the next is refused at once with 503
`overloaded`, as TorchServe refuses a full queue. Runtimes release the GIL while they compute, so
the event loop keeps reading requests meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from handlers.errors import InternalError, Overloaded
from handlers.service import ModelService, Request

log = logging.getLogger(__name__)


@dataclass
class _Job:
    request: Request
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class Batcher:
    def __init__(
        self,
        services: Sequence[ModelService],
        batch_size: int = 1,
        max_delay_s: float = 0.0,
        queue_size: int = 100,
        write: Callable[[Any], Any] | None = None,
    ):
        self.batch_size = max(1, int(batch_size))
        self.max_delay_s = max(0.0, float(max_delay_s))
        self.queue_size = max(1, int(queue_size))
        self.write = write
        """Each answer → what `submit` returns (`ModelService.handle_batch`'s `write`); None: its
        Reply."""
        # queue.Queue, not SimpleQueue: a worker was seen blocked for good in SimpleQueue.get with a
        # 1 ms timeout while 16 gRPC clients sent at once (its C lock wait never returned).
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._waiting = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(
                target=self._work, args=(s,), name=f"oip-{s.model.name}-{i}", daemon=True
            )
            for i, s in enumerate(services)
        ]
        for t in self._threads:
            t.start()

    async def submit(self, request: Request) -> Any:
        """The request's own reply (or written answer) or refusal (never raises for the request's
        sake)."""
        with self._lock:
            if self._waiting >= self.queue_size:
                return Overloaded(
                    f"{self.queue_size} requests are already waiting for this model; retry later"
                )
            self._waiting += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._jobs.put(_Job(request, future, loop))
        return await future

    def stop(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)

    def _take(self) -> list[_Job] | None:
        first = self._jobs.get()
        if first is None:
            return None
        jobs = [first]
        deadline = time.monotonic() + self.max_delay_s
        while len(jobs) < self.batch_size:
            try:  # what is queued at once, else what comes before the deadline
                job = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None:  # stopping: let another worker see it too
                self._jobs.put(None)
                break
            jobs.append(job)
        with self._lock:
            self._waiting -= len(jobs)
        return jobs

    def _work(self, service: ModelService) -> None:
        while (jobs := self._take()) is not None:
            try:
                results = service.handle_batch([j.request for j in jobs], self.write)
            except Exception:  # handle_batch answers per request; this is a bug, not an input
                log.exception("batch of %d failed", len(jobs))
                results = [InternalError(j.request.id) for j in jobs]
            for job, result in zip(jobs, results, strict=True):
                job.loop.call_soon_threadsafe(_settle, job.future, result)


def _settle(future: asyncio.Future, result: Any) -> None:
    if not future.done():  # the client may have gone away (its task cancelled)
        future.set_result(result)
