"""The sentiment model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/sentiment/."""

from tools.plugin import Tools
from tools.sentiment.bench import BENCH
from tools.sentiment.cli import CLI
from tools.sentiment.overload import OVERLOAD
from tools.sentiment.samples import SAMPLES
from training import sentiment

TOOLS = Tools(SAMPLES, sentiment.train_model, cli=CLI, bench=BENCH, overload=OVERLOAD)
