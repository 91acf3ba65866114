"""The tokenization sentiment trains with and is served with: the text kit's
(handlers/kits/text/tokenize.py), by the names training imports."""

from handlers.kits.text.tokenize import TextEncoder, pad_rows, truncate_ids

__all__ = ["TextEncoder", "pad_rows", "truncate_ids"]
