"""Digits: a small image classifier on scikit-learn's bundled 8x8 handwritten digits.

`python -m training.digits --out artifacts/digits [--config default|tiny] [--arch cnn|resnet]`
"""


def train_model(out, config: str = "default", **opts) -> dict:
    """Its tools' entry (tools/digits/__init__.py TOOLS; named apart from its train.py): train the
    named config into `out` (no plots unless asked: fixtures and rehearsals only need the export)."""
    from training.digits.__main__ import run
    from training.digits.config import CONFIGS

    opts.setdefault("plots", False)
    return run(out, CONFIGS[config], **opts)
