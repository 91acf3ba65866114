"""Run the reliability and security suites with a bigger fuzz budget, then the mixed-load
overload case (reliability/overload.py), and write the report.

python -m reliability [--examples 1000] [--out reports] [--skip-overload]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from reliability.record import EXAMPLES_ENV, RECORD_ENV, read_records
from reliability.report import summarize, write

ROOT = Path(__file__).resolve().parents[1]
SUITES = [
    "tests/integration/test_reliability_bad_input.py",
    "tests/integration/test_surface.py",
    "tests/integration/test_pod_proxy.py",
    "tests/integration/test_reliability_faults.py",
    "tests/integration/test_security.py",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--examples", type=int, default=int(os.environ.get(EXAMPLES_ENV, 1000)))
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument(
        "--skip-overload", action="store_true", help="leave out the mixed-load Locust run (~5 min)"
    )
    args = p.parse_args(argv)
    raw = args.out / "reliability-raw"
    shutil.rmtree(raw, ignore_errors=True)
    env = os.environ | {RECORD_ENV: str(raw), EXAMPLES_ENV: str(args.examples)}
    # pytest's own progress line is the progress bar here: one dot per check as it finishes.
    rc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES], cwd=ROOT, env=env
    ).returncode
    if not args.skip_overload:
        # The mixed-load case: Locust against a full-size encoder, before and after (overload.md).
        overload_rc = subprocess.run(
            [sys.executable, "-m", "reliability.overload", "--out", str(args.out)],
            cwd=ROOT,
            env=env,
        ).returncode
        rc = rc or overload_rc
    summary = summarize(read_records(raw), rc, args.examples)
    md, js = write(summary, args.out)
    print(md.read_text())
    print(f"wrote {md} and {js}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
