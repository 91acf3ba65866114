"""REST and gRPC clients for the served models: `python -m clients --help`."""

from clients.client import PROTOCOLS, ModelClient, connect
from clients.errors import AuthError, BadRequest, ClientError, Conflict, ModelNotFound
from clients.settings import ClientSettings

__all__ = [
    "PROTOCOLS",
    "AuthError",
    "BadRequest",
    "ClientError",
    "ClientSettings",
    "Conflict",
    "ModelClient",
    "ModelNotFound",
    "connect",
]
