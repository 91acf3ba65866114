"""Small JSON-object helpers over the S3 client, with S3's error codes turned into StoreErrors."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from deploy.s3.errors import NotFound, StoreError

_MISSING_BUCKET = {"NoSuchBucket"}
_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}
PRECONDITION = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


@contextlib.contextmanager
def store_errors(bucket: str) -> Iterator[None]:
    """Turn botocore failures that a person can act on into one clear message."""
    try:
        yield
    except NoCredentialsError:
        raise StoreError(
            "no AWS credentials found (environment, ~/.aws, or pod role); see docs/s3.md"
        ) from None
    except ClientError as e:
        code = error_code(e)
        if code in _MISSING_BUCKET:
            raise NotFound(f"bucket {bucket!r} does not exist") from None
        if code in {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            raise StoreError(f"access to bucket {bucket!r} denied ({code})") from None
        raise StoreError(f"S3 request failed on bucket {bucket!r}: {e}") from None
    except BotoCoreError as e:
        raise StoreError(f"cannot reach the store for bucket {bucket!r}: {e}") from None


def check_bucket(client, bucket: str) -> None:
    """head_bucket answers a bare 404 for a missing bucket; name it."""
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as e:
        if error_code(e) in _MISSING_BUCKET | _MISSING_KEY:
            raise NotFound(f"bucket {bucket!r} does not exist") from None
        raise


def exists(client, bucket: str, key: str) -> bool:
    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        if error_code(e) in _MISSING_KEY:
            return False
        raise


def get_json(client, bucket: str, key: str) -> tuple[dict, str] | None:
    """(document, ETag), or None when the key does not exist."""
    try:
        obj = client.get_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if error_code(e) in _MISSING_KEY:
            return None
        raise
    return json.loads(obj["Body"].read()), obj["ETag"]


def put_json(client, bucket: str, key: str, doc: dict, **conditions) -> str:
    """Write doc; `conditions` are IfMatch / IfNoneMatch. Returns the new ETag."""
    body = (json.dumps(doc, indent=2) + "\n").encode()
    resp = client.put_object(
        Bucket=bucket, Key=key, Body=body, ContentType="application/json", **conditions
    )
    return resp["ETag"]
