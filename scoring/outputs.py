"""Where a job's parts go: a local folder, or `s3://bucket/prefix/` through the project's S3 layer
(deploy/s3: the usual AWS chain, `AWS_ENDPOINT_URL`, its retries and error messages).

Both keep the same promise: a part is either whole or absent, and a part once written is never
written again. A local part is written under a temporary name and renamed; an S3 part is one PUT
(S3 shows an object only once it is whole) with `If-None-Match: *`, so a second try of the same
partition (Ray retrying an actor that had finished it) cannot overwrite it, and it carries the
sha256 of its bytes in its metadata (checked by S3 on upload, and by `python -m scoring` when a
scored folder on S3 is read as input), as deploy/s3 writes archives.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scoring.errors import ScoringError


def open_output(spec: str | Path | Output) -> Output:
    """`s3://bucket/prefix/` → S3Output, a path → LocalOutput (absolute, so actors find it)."""
    if isinstance(spec, Output):
        return spec
    text = str(spec)
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://") :].partition("/")
        prefix = prefix.strip("/")
        if not bucket or not prefix:
            raise ScoringError(f"{text}: want s3://bucket/prefix/ for the output")
        return S3Output(bucket, prefix + "/")
    return LocalOutput(Path(text).resolve())


@dataclass(frozen=True)
class LocalOutput:
    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def check(self) -> None:
        """Fail early on an output that cannot be written (S3: a missing bucket); writes nothing."""
        # a folder is made by prepare, once the input and the model are known good

    def prepare(self) -> None:
        """Make the folder (S3: check the bucket); remove what a killed run left."""
        self.path.mkdir(parents=True, exist_ok=True)
        for tmp in self.path.glob(".part-*.tmp"):
            tmp.unlink()

    def names(self) -> set[str]:
        return {p.name for p in self.path.glob("part-*.parquet")}

    def exists(self, name: str) -> bool:
        return (self.path / name).exists()

    def write_part(self, name: str, table: Any) -> bool:
        """Write a part; False when it was there already (then it is left as it was)."""
        import pyarrow.parquet as pq

        final = self.path / name
        if final.exists():
            return False
        tmp = self.path / f".{name}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, final)
        return True

    def errors(self, name: str) -> list[dict | None]:
        import pyarrow.parquet as pq

        return pq.read_table(self.path / name, columns=["error"]).column("error").to_pylist()

    def read_json(self, name: str) -> dict | None:
        path = self.path / name
        return json.loads(path.read_text()) if path.is_file() else None

    def write_json(self, name: str, doc: dict) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, self.path / name)

    def remove(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class S3Output:
    bucket: str
    prefix: str
    """Ends with "/"."""

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @functools.cached_property
    def _client(self):
        from deploy.s3 import StoreSettings

        return StoreSettings().client()

    def _errors(self):
        from deploy.s3.objects import store_errors

        return store_errors(self.bucket)

    def check(self) -> None:
        from deploy.s3.objects import check_bucket

        with self._errors():
            check_bucket(self._client, self.bucket)

    def prepare(self) -> None:
        self.check()  # nothing to clean: a PUT is whole or absent

    def names(self) -> set[str]:
        with self._errors():
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + "part-"
            )
            keys = (
                o["Key"][len(self.prefix) :] for page in pages for o in page.get("Contents", [])
            )
            return {name for name in keys if "/" not in name and name.endswith(".parquet")}

    def exists(self, name: str) -> bool:
        from deploy.s3.objects import exists

        with self._errors():
            return exists(self._client, self.bucket, self.prefix + name)

    def write_part(self, name: str, table: Any) -> bool:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from botocore.exceptions import ClientError

        from deploy.s3.objects import PRECONDITION, error_code

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        body = sink.getvalue().to_pybytes()
        digest = hashlib.sha256(body)
        with self._errors():
            try:
                self._client.put_object(
                    Bucket=self.bucket,
                    Key=self.prefix + name,
                    Body=body,
                    ContentType="application/vnd.apache.parquet",
                    Metadata={"sha256": digest.hexdigest()},
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=base64.b64encode(digest.digest()).decode(),
                    IfNoneMatch="*",  # never over a part written by an earlier try
                )
            except ClientError as e:
                if error_code(e) in PRECONDITION:
                    return False
                raise
        return True

    def errors(self, name: str) -> list[dict | None]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self._errors():
            body = self._client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
            table = pq.read_table(pa.BufferReader(body.read()), columns=["error"])
        return table.column("error").to_pylist()

    def read_json(self, name: str) -> dict | None:
        from deploy.s3.objects import get_json

        with self._errors():
            found = get_json(self._client, self.bucket, self.prefix + name)
        return found[0] if found else None

    def write_json(self, name: str, doc: dict) -> None:
        from deploy.s3.objects import put_json

        with self._errors():
            put_json(self._client, self.bucket, self.prefix + name, doc)

    def remove(self, name: str) -> None:
        with self._errors():
            self._client.delete_object(Bucket=self.bucket, Key=self.prefix + name)


Output = LocalOutput | S3Output
