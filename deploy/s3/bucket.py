"""create-bucket: the one step before the first publish, done the same way on AWS and MinIO/moto."""

from __future__ import annotations

from botocore.exceptions import ClientError

from deploy.s3.objects import error_code, store_errors
from deploy.s3.settings import StoreSettings


def create_bucket(bucket: str, settings: StoreSettings | None = None) -> bool:
    """Create `bucket` in the client's region; False when this account already owns it."""
    client = (settings or StoreSettings()).client()
    region = client.meta.region_name
    # S3 refuses a LocationConstraint of us-east-1 and needs one everywhere else.
    config = {} if region in (None, "us-east-1") else {"LocationConstraint": region}
    with store_errors(bucket):
        try:
            # S3 in us-east-1 answers a repeated create with 200: ask first, to say which it was.
            client.head_bucket(Bucket=bucket)
            return False
        except ClientError as e:
            if error_code(e) not in {"404", "NoSuchBucket", "NotFound"}:
                raise
        try:
            client.create_bucket(
                Bucket=bucket, **({"CreateBucketConfiguration": config} if config else {})
            )
        except ClientError as e:
            if error_code(e) == "BucketAlreadyOwnedByYou":
                return False
            raise
    return True
