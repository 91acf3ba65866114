"""python -m training.sentiment --out DIR [--config default|tiny]"""

from __future__ import annotations

import argparse
import sys

from training.common.parity import ParityError
from training.sentiment.config import CONFIGS
from training.sentiment.pipeline import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.sentiment", description=__doc__)
    parser.add_argument(
        "--out", required=True, help="artifact directory (manifest.json written last)"
    )
    parser.add_argument("--config", choices=sorted(CONFIGS), default="default")
    args = parser.parse_args(argv)
    try:
        manifest = run(args.out, CONFIGS[args.config])
    except ParityError as err:
        print(f"export rejected, no manifest written: {err}", file=sys.stderr)
        return 1
    m = manifest["metrics"]
    print(
        f"sentiment [{args.config}] IMDB test accuracy {m.get('test_accuracy_imdb', float('nan')):.4f}, "
        f"ECE {m['ece_before']:.4f} -> {m['ece_after']:.4f} (T={m['temperature']:.3f}), "
        f"parity max |diff| {manifest['parity']['max_abs_diff']}; wrote {args.out}/manifest.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
