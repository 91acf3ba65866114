"""Wait until TorchServe (started from this directory) has READY workers for the named models.

python -m deploy.wait_ready --config config.properties MODEL [MODEL ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from deploy.serving import read_properties, wait_ready
from deploy.ts_files import log_dir


def server_running() -> bool:
    """False once the server `torchserve --start` recorded in $TMPDIR/.model_server.pid has
    exited (a bad setting, a port in use): then waiting is pointless. True when unsure."""
    pid_file = Path(tempfile.gettempdir()) / ".model_server.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return True  # started some other way, or elsewhere: wait for the timeout
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("models", nargs="+")
    p.add_argument("--config", default="config.properties")
    p.add_argument("--keys-dir", default=".", help="where TorchServe wrote key_file.json")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument(
        "--logs",
        default=str(log_dir(".")),
        help="TorchServe's log folder: a model's last load failure is quoted on timeout",
    )
    args = p.parse_args(argv)
    props = read_properties(args.config)
    try:
        wait_ready(
            props["management_address"],
            args.keys_dir,
            args.models,
            args.timeout,
            server_running,
            logs=args.logs,
        )
    except TimeoutError as e:
        print(f"wait_ready: {e}", file=sys.stderr)
        return 1
    inference = props["inference_address"]
    print(f"ready: {', '.join(args.models)} at {inference} (token: inference key in key_file.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
