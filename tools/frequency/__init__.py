"""The frequency model's tool parts (tools/plugin.py), `TOOLS`; its serving code is
handlers/frequency/."""

from tools.frequency.bench import BENCH
from tools.frequency.cli import CLI
from tools.frequency.rehearsal import REHEARSAL
from tools.frequency.samples import SAMPLES
from tools.plugin import Tools
from training import frequency

TOOLS = Tools(SAMPLES, frequency.train_model, cli=CLI, bench=BENCH, rehearsal=REHEARSAL)
