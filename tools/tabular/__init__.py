"""The tabular model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/tabular/."""

from tools.plugin import Tools
from tools.tabular.bench import BENCH
from tools.tabular.cli import CLI
from tools.tabular.samples import SAMPLES
from training import tabular

TOOLS = Tools(SAMPLES, tabular.train_model, cli=CLI, bench=BENCH)
