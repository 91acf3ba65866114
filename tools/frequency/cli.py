"""This model's options for `python -m clients` (the hooks tools/registry.py describes).

python -m clients predict frequency --synthetic 400 --sample-rate 1000 --frequencies 1,3
python -m clients predict frequency --signal 0.1,0.5,0.9 --sample-rate 1000
python -m clients predict frequency --synthetic 2000 --float32     # float32 body and answer
python -m clients stream frequency --input signal.txt --chunk 500 --frequencies 1,3
sensor | python -m clients stream frequency --chunk 200 --protocol grpc   # stdin, as it comes
python -m clients stream frequency --input signal.f32 --input-format f32 --float32
python -m clients explain frequency --synthetic 2000 --frequencies 1,3 --png why.png
"""

from __future__ import annotations

import argparse

from tools.frequency.client import SignalStream, extract
from tools.plugin import Cli


def arguments(group: argparse._ArgumentGroup) -> None:
    """`predict` options."""
    group.add_argument("--signal", help="comma-separated samples")
    group.add_argument(
        "--synthetic", type=int, metavar="N", help="send N samples of a noisy sum of sinusoids"
    )
    group.add_argument("--sample-rate", type=float, default=1000.0)
    group.add_argument("--frequencies", help="comma-separated frequencies to extract, e.g. 1,3")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument(
        "--float32", action="store_true", help="frequency over REST: float32 body and answer"
    )


def stream_arguments(group: argparse._ArgumentGroup) -> None:
    """`stream` options."""
    group.add_argument("--frequencies", help="comma-separated frequencies to extract, e.g. 1,3")
    group.add_argument("--sample-rate", type=float)
    group.add_argument("--float32", action="store_true", help="REST: float32 bodies and answers")


def frequencies_of(args: argparse.Namespace) -> list[float] | None:
    return [float(f) for f in args.frequencies.split(",")] if args.frequencies else None


def request(args: argparse.Namespace) -> dict | None:
    """The JSON body `predict` sends, or None when none of this model's options was given."""
    if args.signal is None and not args.synthetic:
        return None
    if args.synthetic:
        from tools.frequency.samples import synthetic_signal

        signal = synthetic_signal(args.synthetic, args.sample_rate, seed=args.seed).tolist()
    else:
        signal = [float(x) for x in args.signal.split(",") if x.strip()]
    payload: dict = {"signal": signal, "sample_rate": args.sample_rate}
    if args.frequencies:
        payload["frequencies"] = frequencies_of(args)
    return payload


def predict(client, args: argparse.Namespace, payload: dict | str) -> dict | None:
    """The answer of a call that is not a plain JSON prediction (--float32), else None."""
    if not args.float32:
        return None
    if not isinstance(payload, dict):
        raise ValueError("--float32 sends a signal (--signal or --synthetic)")
    return extract(
        client,
        payload["signal"],
        payload.get("frequencies"),
        payload.get("sample_rate"),
        args.model,
        float32=True,
    ).to_json()


def stream(client, args: argparse.Namespace, state: str | None) -> SignalStream:
    """A stream for `stream`: .send(chunk) -> answer (.to_json()), .state after each chunk."""
    return SignalStream(
        client, frequencies_of(args), args.sample_rate, args.model, args.float32, state
    )


def view(client, args: argparse.Namespace, payload, answer, path):
    """`explain --png`: the signal, each explained component (one prediction of the same body)
    and the attribution of every sample."""
    import numpy as np

    from tools.frequency.explain_view import render_png

    if args.html:
        raise ValueError("frequency explanations are images: use --png")
    prediction = client.predict(args.model, payload, version=args.version)
    rate = float(payload.get("sample_rate") or prediction["sample_rate"])
    return render_png(np.asarray(payload["signal"]), rate, prediction, answer, path)


CLI = Cli(
    arguments=arguments,
    request=request,
    predict=predict,
    stream_arguments=stream_arguments,
    stream=stream,
    view=view,
)
"""This model's `python -m clients` parts (tools/plugin.py)."""
