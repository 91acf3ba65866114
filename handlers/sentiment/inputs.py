"""sentiment's requests: the text kit's (handlers/kits/text/inputs.py)."""

from handlers.kits.text.inputs import TextRequest, check_text, parse_texts

__all__ = ["TextRequest", "check_text", "parse_texts"]
