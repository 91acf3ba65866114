"""The model store on S3: publish immutable versions, move stage pointers, pull with verification.

Layout and guards are described in docs/s3.md; the CLI is `python -m deploy`.
"""

from deploy.s3.catalog import VersionRow, list_versions
from deploy.s3.errors import (
    IntegrityError,
    NotFound,
    NothingToRollBack,
    StageConflict,
    StoreError,
    VersionExists,
)
from deploy.s3.layout import STAGES, Layout
from deploy.s3.publish import Published, publish
from deploy.s3.pull import Pulled, pull
from deploy.s3.settings import StoreSettings
from deploy.s3.stages import promote, rollback

__all__ = [
    "STAGES",
    "IntegrityError",
    "Layout",
    "NotFound",
    "NothingToRollBack",
    "Published",
    "Pulled",
    "StageConflict",
    "StoreError",
    "StoreSettings",
    "VersionExists",
    "VersionRow",
    "list_versions",
    "promote",
    "publish",
    "pull",
    "rollback",
]
