"""The tabular model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/tabular/."""

from tools.plugin import Parts, Tools
from tools.tabular.samples import SAMPLES


def parts() -> Parts:
    """Its parts but the samples (imports them, and its training package)."""
    from tools.tabular.bench import BENCH
    from tools.tabular.cli import CLI
    from training import tabular

    return Parts(tabular.train_model, cli=CLI, bench=BENCH)


TOOLS = Tools(SAMPLES, parts)
