"""What can go wrong with the model store, as a few exceptions the CLI turns into one-line messages."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class: the message is meant for a person at a terminal or in an init container's log."""


class NotFound(StoreError):
    """The bucket, model, version or stage pointer does not exist."""


class VersionExists(StoreError):
    """Versions are immutable: a second publish of the same version is refused."""


class IntegrityError(StoreError):
    """Downloaded bytes do not match the sha256 the published manifest promises."""


class StageConflict(StoreError):
    """Someone else moved the stage pointer between our read and our write."""


class NothingToRollBack(StoreError):
    """The stage has no earlier version to return to."""
