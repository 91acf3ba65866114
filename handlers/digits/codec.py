"""digits' wire contract: the image kit's (handlers/kits/image/decode.py; docs/digits.md)."""

from handlers.kits.image.decode import IMAGE_TYPES, decode_request, read_request

__all__ = ["IMAGE_TYPES", "decode_request", "read_request"]
