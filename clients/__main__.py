"""Command line over the client, the same calls over either protocol.

    python -m clients health --protocol grpc
    python -m clients models
    python -m clients predict sentiment --text "A warm, funny film" --protocol grpc
    python -m clients predict sentiment --text "Loved it" --text "Hated it"
    python -m clients predict frequency --synthetic 400 --sample-rate 1000 --frequencies 1,3
    python -m clients predict frequency --signal 0.1,0.5,0.9 --sample-rate 1000
    python -m clients predict MODEL --json '{"any": "body"}'

Addresses come from --config (config.properties) and the token from --key-file (default: the
key_file.json next to the config) or TS_INFERENCE_KEY / TS_MANAGEMENT_KEY. Exit status: 0 ok,
2 the request was refused (4xx, message on stderr), 1 the server or connection failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clients.client import PROTOCOLS, connect
from clients.errors import ClientError
from clients.settings import ClientSettings


def build_payload(args: argparse.Namespace) -> dict | str:
    if args.json is not None:
        return json.loads(args.json)
    if args.text:
        return {"text": args.text[0]} if len(args.text) == 1 else {"texts": args.text}
    if args.signal is not None or args.synthetic:
        if args.synthetic:
            from loadtests.payloads import synthetic_signal

            signal = synthetic_signal(args.synthetic, args.sample_rate, seed=args.seed).tolist()
        else:
            signal = [float(x) for x in args.signal.split(",") if x.strip()]
        payload: dict = {"signal": signal, "sample_rate": args.sample_rate}
        if args.frequencies:
            payload["frequencies"] = [float(f) for f in args.frequencies.split(",")]
        return payload
    raise SystemExit("predict needs --text, --signal, --synthetic or --json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m clients",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--protocol", choices=PROTOCOLS, default="rest")
    common.add_argument(
        "--config",
        type=Path,
        default=Path("config.properties"),
        help="TorchServe config.properties",
    )
    common.add_argument(
        "--key-file", type=Path, help="TorchServe key_file.json (default: next to --config)"
    )
    common.add_argument("--timeout", type=float, default=60.0)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("health", parents=[common], help="server health (needs the inference key)")
    sub.add_parser("models", parents=[common], help="list served models (needs the management key)")
    pred = sub.add_parser("predict", parents=[common], help="one prediction")
    pred.add_argument("model")
    pred.add_argument("--version")
    pred.add_argument("--text", action="append", help="a review; repeat for a batch request")
    pred.add_argument("--signal", help="comma-separated samples")
    pred.add_argument(
        "--synthetic", type=int, metavar="N", help="send N samples of a noisy sum of sinusoids"
    )
    pred.add_argument("--sample-rate", type=float, default=1000.0)
    pred.add_argument("--frequencies", help="comma-separated frequencies to extract, e.g. 1,3")
    pred.add_argument("--seed", type=int, default=0)
    pred.add_argument("--json", help="a raw JSON request body")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = ClientSettings.from_properties(
        args.config, key_file=args.key_file, timeout=args.timeout
    )
    try:
        with connect(args.protocol, settings) as client:
            if args.command == "health":
                answer = client.health()
            elif args.command == "models":
                answer = client.list_models()
            else:
                answer = client.predict(args.model, build_payload(args), version=args.version)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if 400 <= e.status < 500 else 1
    json.dump(answer, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
