"""Sentiment model: pretrained MiniLM encoder fine-tuned with a small stochastic head, exported to
TorchScript and ONNX (logits + head features), calibrated, parity-gated and described by a manifest.

Entry point: `python -m training.sentiment --out DIR [--config default|tiny]`.
"""


def train_model(out, config: str = "default", **opts) -> dict:
    """Its tools' entry (tools/sentiment/__init__.py TOOLS; named apart from its train.py): train the
    named config into `out`."""
    from training.sentiment.config import CONFIGS
    from training.sentiment.pipeline import run

    return run(out, CONFIGS[config], **opts)
