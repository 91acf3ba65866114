"""frequency's wire contract: the signal kit's (handlers/kits/signal/codec.py; docs/clients.md)."""

from handlers.kits.signal.codec import *  # noqa: F403
