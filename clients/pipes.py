"""Command-line tools end quietly when their reader goes away (`python -m clients … | head`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

SIGPIPE_EXIT = 141
"""128 + SIGPIPE: what a shell reports for a command its pipe's reader left behind."""


def run_cli(main: Callable[[], int]) -> int:
    """`sys.exit(run_cli(main))`: main's exit status, or 141 without a traceback once stdout's
    reader has closed the pipe."""
    try:
        code = main()
        sys.stdout.flush()  # a buffered answer fails here, not in the interpreter's exit flush
        return code
    except BrokenPipeError:
        # Python flushes stdout once more at exit, into the same closed pipe: send that to
        # /dev/null so that it cannot print "Exception ignored ... BrokenPipeError" either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return SIGPIPE_EXIT
