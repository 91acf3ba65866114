"""Tabular: a small MLP on scikit-learn's bundled breast-cancer records (30 numeric features).

`python -m training.tabular --out artifacts/tabular [--config default|tiny]`
"""


def train_model(out, config: str = "default", **opts) -> dict:
    """Its tools' entry (tools/tabular/__init__.py TOOLS; named apart from its train.py): train the
    named config into `out` (no plots unless asked: fixtures only need the export)."""
    from training.tabular.__main__ import run
    from training.tabular.config import CONFIGS

    opts.setdefault("plots", False)
    return run(out, CONFIGS[config], **opts)
