"""The frequency model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/frequency/."""

from tools.frequency.samples import SAMPLES
from tools.plugin import Parts, Tools


def parts() -> Parts:
    """Its parts but the samples (imports them, and its training package)."""
    from tools.frequency.bench import BENCH
    from tools.frequency.cli import CLI
    from tools.frequency.rehearsal import REHEARSAL
    from training import frequency

    return Parts(frequency.train_model, cli=CLI, bench=BENCH, rehearsal=REHEARSAL)


TOOLS = Tools(SAMPLES, parts)
