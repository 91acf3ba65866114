"""frequency's explanations: the signal kit's block attributions (handlers/kits/signal/explain.py),
by the names training's faithfulness check imports."""

from handlers.kits.signal.explain import BlockExplainer as FrequencyExplainer
from handlers.kits.signal.explain import SignalExplanation as FrequencyExplanation

__all__ = ["FrequencyExplainer", "FrequencyExplanation"]
