"""Sentiment model: pretrained MiniLM encoder fine-tuned with a small stochastic head, exported to
TorchScript and ONNX (logits + head features), calibrated, parity-gated and described by a manifest.

Entry point: `python -m training.sentiment --out DIR [--config default|tiny]`.
"""


def train(out, config: str = "default", **opts) -> dict:
    """The registry's entry (handlers/registry.py): train the named config into `out`."""
    from training.sentiment.config import CONFIGS
    from training.sentiment.pipeline import run

    return run(out, CONFIGS[config], **opts)
