"""Where the server is: one typed object for both protocols, read from config.properties."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from clients.tokens import TokenSource

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ClientSettings:
    inference_url: str = "http://127.0.0.1:8080"
    """REST inference API (POST /predictions/<model>, GET /ping)."""
    management_url: str = "http://127.0.0.1:8081"
    """REST management API (GET /models) and the token API."""
    grpc_target: str = "127.0.0.1:7070"
    """gRPC inference service host:port."""
    grpc_management_target: str = "127.0.0.1:7071"
    """gRPC management service host:port."""
    key_file: Path | None = ROOT / "key_file.json"
    """TorchServe's key_file.json (written into the server's working directory)."""
    timeout: float = 60.0
    """Seconds per call before it fails with ConnectionFailed."""

    @classmethod
    def from_properties(
        cls, path: str | Path = ROOT / "config.properties", key_file: str | Path | None = None, **kw
    ) -> ClientSettings:
        """Addresses from a TorchServe config.properties; the key file defaults to its folder."""
        from deploy.serving import read_properties

        path = Path(path)
        props = read_properties(path)
        grpc_host = _connect_host(props.get("grpc_inference_address", "127.0.0.1"))
        grpc_mgmt_host = _connect_host(props.get("grpc_management_address", "127.0.0.1"))
        return cls(
            inference_url=_connect_url(props.get("inference_address", cls.inference_url)),
            management_url=_connect_url(props.get("management_address", cls.management_url)),
            grpc_target=f"{grpc_host}:{props.get('grpc_inference_port', '7070')}",
            grpc_management_target=f"{grpc_mgmt_host}:{props.get('grpc_management_port', '7071')}",
            key_file=Path(key_file) if key_file else path.resolve().parent / "key_file.json",
            **kw,
        )

    def tokens(self, keys: dict[str, str] | None = None) -> TokenSource:
        return TokenSource(
            key_file=self.key_file,
            keys=keys,
            management_url=self.management_url,
            timeout=self.timeout,
        )


def _connect_host(host: str) -> str:
    # A server listening on every interface is reached on loopback from here.
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _connect_url(url: str) -> str:
    parts = urlsplit(url)
    host = _connect_host(parts.hostname or "127.0.0.1")
    return f"{parts.scheme}://{host}:{parts.port}" if parts.port else f"{parts.scheme}://{host}"
