"""The sentiment classifier's serving code: the text kit (handlers/kits/text/) under its name.
`SPEC` is its one hook (handlers/spec.py)."""

from handlers.kits import text
from handlers.kits.text import oip
from handlers.sentiment.model import SentimentModel
from handlers.sentiment.settings import SentimentSettings
from handlers.spec import ModelSpec

SPEC = ModelSpec(
    "sentiment", model=SentimentModel, settings=SentimentSettings, kit=text, contract=oip
)
