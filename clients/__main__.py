"""Command line over the client, the same calls over either protocol.

    python -m clients health --protocol grpc
    python -m clients models
    python -m clients predict MODEL --json '{"any": "body"}'
    python -m clients predict MODEL [the model's own options]
    python -m clients stream [MODEL] --input samples.txt --chunk 500 [the model's own options]
    python -m clients explain MODEL [the model's predict options] [--html F | --png F]

Each registered model adds its own options and builds its own requests (the `cli` module in its
folder, tools/<model>/cli.py: its typed `CLI` of `arguments`, `request`, `predict`,
`stream_arguments`, `stream`, `view`; tools/plugin.py, tools/registry.py); `--help` lists them by model, and each model's cli.py shows its examples.

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
from tools.plugin import Cli
from tools.registry import MODELS


def clis() -> list[Cli]:
    """The models' client parts (tools/<model>/cli.py `CLI`), in registry order."""
    return [cli for spec in MODELS if (cli := spec.cli()) is not None]


def stream_models() -> list[str]:
    return [spec.name for spec in MODELS if (cli := spec.cli()) is not None and cli.stream]


def option_strings(groups: list) -> str:
    """The models' `predict` options, for the message when none was given."""
    return ", ".join(a.option_strings[-1] for g in groups for a in g._group_actions)


def build_payload(args: argparse.Namespace) -> dict | str:
    if args.json is not None:
        return json.loads(args.json)
    # Every model's options are on the command line; the first model whose options were given
    # builds the body.
    for cli in clis():
        payload = cli.request(args) if cli.request is not None else None
        if payload is not None:
            return payload
    raise SystemExit(f"predict needs {args.model_options} or --json")


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
    pred.add_argument("--json", help="a raw JSON request body")
    groups = []
    for spec in MODELS:
        cli = spec.cli()
        if cli is not None and cli.arguments is not None:
            groups.append(pred.add_argument_group(f"{spec.name} options"))
            cli.arguments(groups[-1])
    ex = sub.add_parser(
        "explain",
        parents=[common],
        help="why the model answers what it does: the prediction's explanation",
    )
    ex.add_argument("model")
    ex.add_argument("--version")
    ex.add_argument("--json", help="a raw JSON request body")
    ex.add_argument("--html", type=Path, help="write the explanation as a page (text models)")
    ex.add_argument("--png", type=Path, help="write the explanation as an image (signals, images)")
    for spec in MODELS:
        cli = spec.cli()
        if cli is not None and cli.arguments is not None:
            cli.arguments(ex.add_argument_group(f"{spec.name} options"))
    streaming = stream_models()
    st = sub.add_parser("stream", parents=[common], help="stream samples chunk by chunk")
    st.add_argument(
        "model",
        nargs="?",
        default=streaming[0] if streaming else None,
        help=f"a model that streams: {', '.join(streaming)} (default: the first)",
    )
    st.add_argument("--input", type=Path, help="file of samples (default: stdin)")
    st.add_argument("--input-format", choices=("text", "f32"), default="text")
    st.add_argument("--chunk", type=int, default=500, help="samples per request")
    st.add_argument("--state-file", type=Path, help="resume from the state in it; keep it updated")
    for spec in MODELS:
        cli = spec.cli()
        if cli is not None and cli.stream_arguments is not None:
            cli.stream_arguments(st.add_argument_group(f"{spec.name} options"))
    args = p.parse_args(argv)
    args.model_options = option_strings(groups)
    return args


def model_cli(model: str) -> Cli:
    """The model's client parts (none for an unknown model or one without a cli.py)."""
    from tools.registry import get

    try:
        cli = get(model).cli()
    except KeyError:
        return Cli()
    return cli if cli is not None else Cli()


def run_stream(client, args: argparse.Namespace) -> None:
    stream_of = model_cli(args.model).stream
    if stream_of is None:
        raise ValueError(f"{args.model} does not stream: streaming models are {stream_models()}")
    state = None
    if args.state_file and args.state_file.exists():
        state = args.state_file.read_text().strip() or None
    stream = stream_of(client, args, state)
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


def run_explain(client, args: argparse.Namespace) -> Any:
    """The explanation, and its page or image where --html/--png asks (the model's cli `view`)."""
    payload = build_payload(args)
    answer = client.explain(args.model, payload, version=args.version)
    out = args.html or args.png
    if out is not None:
        view = model_cli(args.model).view
        if view is None:
            raise ValueError(f"{args.model} has no --html/--png view")
        path = view(client, args, payload, answer, out)
        print(f"wrote {path}", file=sys.stderr)
    return answer


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
            elif args.command == "explain":
                answer = run_explain(client, args)
            else:
                payload = build_payload(args)
                # A model's own way of calling (e.g. a binary body) where its options ask for it.
                answer = next(
                    (
                        a
                        for cli in clis()
                        if cli.predict is not None
                        and (a := cli.predict(client, args, payload)) is not None
                    ),
                    None,
                )
                if answer is None:
                    answer = client.predict(args.model, payload, version=args.version)
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
