"""A package re-export: callers import ``publish_blob`` from here, the def lives in store."""

from .store import publish as publish_blob

__all__ = ["publish_blob"]
