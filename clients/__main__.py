"""Command line over the client, the same calls over either protocol.

    python -m clients health --protocol grpc
    python -m clients models
    python -m clients predict sentiment --text "A warm, funny film" --protocol grpc
    python -m clients predict sentiment --text "Loved it" --text "Hated it"
    python -m clients predict frequency --synthetic 400 --sample-rate 1000 --frequencies 1,3
    python -m clients predict frequency --signal 0.1,0.5,0.9 --sample-rate 1000
    python -m clients predict MODEL --json '{"any": "body"}'
    python -m clients predict frequency --synthetic 2000 --float32     # float32 body and answer
    python -m clients stream frequency --input signal.txt --chunk 500 --frequencies 1,3
    sensor | python -m clients stream frequency --chunk 200 --protocol grpc   # stdin, as it comes
    python -m clients stream frequency --input signal.f32 --input-format f32 --float32

`stream` reads samples (text numbers separated by spaces, commas or newlines, or raw little-endian
float32 with --input-format f32) from --input or stdin, sends every --chunk samples as one chunk of
one stream and prints one JSON line per chunk; the state travels with each call, so any replica
can answer any chunk. --state-file resumes from a saved state and keeps the latest one there.

Addresses come from --config (config.properties) and the token from --key-file (default: the
key_file.json next to the config) or TS_INFERENCE_KEY / TS_MANAGEMENT_KEY. Exit status: 0 ok,
2 the request was refused (4xx, message on stderr), 1 the server or connection failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from clients.chunks import read_chunks
from clients.client import PROTOCOLS, connect
from clients.errors import ClientError
from clients.pipes import run_cli
from clients.settings import ClientSettings
from handlers.frequency.client import SignalStream, extract


def build_payload(args: argparse.Namespace) -> dict | str:
    if args.json is not None:
        return json.loads(args.json)
    if args.text:
        return {"text": args.text[0]} if len(args.text) == 1 else {"texts": args.text}
    if args.signal is not None or args.synthetic:
        if args.synthetic:
            from handlers.frequency.samples import synthetic_signal

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
    pred.add_argument(
        "--float32", action="store_true", help="frequency over REST: float32 body and answer"
    )
    st = sub.add_parser("stream", parents=[common], help="stream a signal chunk by chunk")
    st.add_argument("model", nargs="?", default="frequency")
    st.add_argument("--input", type=Path, help="file of samples (default: stdin)")
    st.add_argument("--input-format", choices=("text", "f32"), default="text")
    st.add_argument("--chunk", type=int, default=500, help="samples per request")
    st.add_argument("--frequencies", help="comma-separated frequencies to extract, e.g. 1,3")
    st.add_argument("--sample-rate", type=float)
    st.add_argument("--float32", action="store_true", help="REST: float32 bodies and answers")
    st.add_argument("--state-file", type=Path, help="resume from the state in it; keep it updated")
    return p.parse_args(argv)


def frequencies_of(args: argparse.Namespace) -> list[float] | None:
    return [float(f) for f in args.frequencies.split(",")] if args.frequencies else None


def run_stream(client, args: argparse.Namespace) -> None:
    state = None
    if args.state_file and args.state_file.exists():
        state = args.state_file.read_text().strip() or None
    stream = SignalStream(
        client, frequencies_of(args), args.sample_rate, args.model, args.float32, state
    )
    source = args.input.open("rb") if args.input else sys.stdin.buffer
    try:
        for chunk in read_chunks(source, args.chunk, args.input_format):
            answer = stream.send(chunk)
            if args.state_file:
                args.state_file.write_text(stream.state or "")
            print(json.dumps(answer.to_json()), flush=True)
    finally:
        if args.input:
            source.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = ClientSettings.from_properties(
        args.config, key_file=args.key_file, timeout=args.timeout
    )
    answer: Any
    try:
        with connect(args.protocol, settings) as client:
            if args.command == "health":
                answer = client.health()
            elif args.command == "models":
                answer = client.list_models()
            elif args.command == "stream":
                run_stream(client, args)
                return 0
            elif args.float32:
                payload = build_payload(args)
                if not isinstance(payload, dict):
                    raise ValueError("--float32 sends a signal (--signal or --synthetic)")
                answer = extract(
                    client,
                    payload["signal"],
                    payload.get("frequencies"),
                    payload.get("sample_rate"),
                    args.model,
                    float32=True,
                ).to_json()
            else:
                answer = client.predict(args.model, build_payload(args), version=args.version)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if 400 <= e.status < 500 else 1
    except ValueError as e:  # e.g. unreadable input samples, float32 over gRPC
        print(f"error: {e}", file=sys.stderr)
        return 2
    json.dump(answer, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
