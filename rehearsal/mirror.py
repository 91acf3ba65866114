"""Live-traffic mirroring for `make rollout`: nginx (its mirror module) in front of the balancer
hands every REST prediction to the balancer as it came and a copy of it to a recorder in this
process (deploy/mirror.py: the config text, the recorder and why a copy never reaches a client's
answer), so the candidate is judged on what clients really send. The recorder keeps the newest
`keep` copies; `take(n)` hands out the newest not yet judged.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from deploy.mirror import Copy, Recorder, nginx_config
from rehearsal.pod import free_port


@dataclass
class Mirror:
    root: Path
    upstream: str
    """host:port the clients' requests go on to (the balancer's REST port)."""
    keep: int = 2000
    max_body: str = "8m"
    port: int = 0
    proc: subprocess.Popen | None = None
    recorder: Recorder | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def taken(self) -> int:
        return self.recorder.taken if self.recorder is not None else 0

    def start(self, timeout: float = 15) -> Mirror:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.root.mkdir(parents=True, exist_ok=True)
        self.recorder = Recorder(("127.0.0.1", 0), self.keep).start()
        self.port = free_port()
        config = self.root / "nginx.conf"
        config.write_text(
            nginx_config(
                root=str(self.root),
                listen=f"127.0.0.1:{self.port}",
                door=self.upstream,
                recorder=f"127.0.0.1:{self.recorder.server_address[1]}",
                max_body=self.max_body,
            )
        )
        with open(self.root / "nginx.out", "ab") as out:
            self.proc = subprocess.Popen(
                [nginx, "-p", str(self.root), "-c", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log = (self.root / "nginx.out").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"nginx did not start:\n{log}") from None
                time.sleep(0.1)
        return self

    def copies(self) -> list[Copy]:
        """Every copy kept, oldest first."""
        assert self.recorder is not None
        return list(self.recorder.copies)

    def take(self, n: int) -> list[Copy]:
        """Up to the `n` newest copies not handed out before (the recorder keeps `keep`)."""
        assert self.recorder is not None
        return self.recorder.take(n)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: in-flight requests finish
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.recorder is not None:
            self.recorder.shutdown()
            self.recorder.server_close()
