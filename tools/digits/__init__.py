"""The digits model's tool parts (tools/plugin.py), `TOOLS`; its serving code is handlers/digits/."""

from tools.digits.bench import BENCH
from tools.digits.cli import CLI
from tools.digits.samples import SAMPLES
from tools.plugin import Tools
from training import digits

TOOLS = Tools(SAMPLES, digits.train_model, cli=CLI, bench=BENCH)
