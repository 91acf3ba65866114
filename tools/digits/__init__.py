"""The digits model's tool parts (tools/plugin.py), `TOOLS`; its serving code is handlers/digits/."""

from tools.digits.samples import SAMPLES
from tools.plugin import Parts, Tools


def parts() -> Parts:
    """Its parts but the samples (imports them, and its training package)."""
    from tools.digits.bench import BENCH
    from tools.digits.cli import CLI
    from training import digits

    return Parts(digits.train_model, cli=CLI, bench=BENCH)


TOOLS = Tools(SAMPLES, parts)
