"""How to reach the store: endpoint, timeouts, retries and transfer sizes, as one typed object.

Credentials and region come from the standard AWS chain (environment, shared files, instance or
pod role); `endpoint_url` (or AWS_ENDPOINT_URL, which botocore reads itself) points at an
S3-compatible store such as MinIO or moto.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import boto3
import botocore.session
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.loaders import Loader, create_loader

MiB = 1024 * 1024


@dataclass(frozen=True)
class StoreSettings:
    endpoint_url: str | None = None
    """S3-compatible endpoint; None lets botocore use AWS_ENDPOINT_URL or the AWS default."""
    region: str | None = None
    """None: the AWS chain decides (AWS_REGION / AWS_DEFAULT_REGION / config file)."""
    connect_timeout: float = 10.0
    """Seconds to open a connection; an unreachable store fails fast in an init container."""
    read_timeout: float = 60.0
    """Seconds to wait for a response once connected."""
    max_attempts: int = 5
    """Total attempts per request with botocore's "standard" retry mode (backoff + jitter)."""
    multipart_threshold: int = 64 * MiB
    """Archives at least this large go up in parts."""
    multipart_chunksize: int = 16 * MiB
    """Part size; s3transfer raises anything under 5 MiB to 5 MiB, as S3 requires."""
    max_concurrency: int = 4
    """Parallel part transfers."""

    def client(self):
        config = Config(
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            retries={"mode": "standard", "total_max_attempts": self.max_attempts},
            # Only send/verify checksums when we ask for them: we ask explicitly, per call.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        core = botocore.session.get_session()
        core.register_component("data_loader", _shared_loader())
        return boto3.session.Session(botocore_session=core, region_name=self.region).client(
            "s3", endpoint_url=self.endpoint_url, config=config
        )

    def transfer(self) -> TransferConfig:
        return TransferConfig(
            multipart_threshold=self.multipart_threshold,
            multipart_chunksize=self.multipart_chunksize,
            max_concurrency=self.max_concurrency,
        )


@functools.cache
def _shared_loader() -> Loader:
    """Parsing the S3 service model is most of a client's creation time (~0.2 s); sharing the
    loader caches it, while credentials, region and endpoint are still resolved per client."""
    return create_loader()
