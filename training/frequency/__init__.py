"""Frequency extraction: an LSTM that pulls one clean sinusoid out of a noisy mix of four.

`python -m training.frequency --out artifacts/frequency [--config default|tiny]`
"""


def train_model(out, config: str = "default", **opts) -> dict:
    """Its tools' entry (tools/frequency/__init__.py TOOLS; named apart from its train.py): train the
    named config into `out` (no plots unless asked: fixtures and rehearsals only need the export)."""
    from training.frequency.__main__ import run
    from training.frequency.config import CONFIGS

    opts.setdefault("plots", False)
    return run(out, CONFIGS[config], **opts)
