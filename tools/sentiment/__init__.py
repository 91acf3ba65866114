"""The sentiment model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/sentiment/."""

from tools.plugin import Parts, Tools
from tools.sentiment.samples import SAMPLES


def parts() -> Parts:
    """Its parts but the samples (imports them, and its training package)."""
    from tools.sentiment.bench import BENCH
    from tools.sentiment.cli import CLI
    from tools.sentiment.overload import OVERLOAD
    from training import sentiment

    return Parts(sentiment.train_model, cli=CLI, bench=BENCH, overload=OVERLOAD)


TOOLS = Tools(SAMPLES, parts)
