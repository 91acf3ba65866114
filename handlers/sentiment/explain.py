"""sentiment's explanations: the text kit's word or group attributions
(handlers/kits/text/explain.py), by the names training's faithfulness check imports."""

from handlers.kits.text.explain import METHODS, SCORES, word_spans
from handlers.kits.text.explain import TextExplainer as SentimentExplainer

__all__ = ["METHODS", "SCORES", "SentimentExplainer", "word_spans"]
