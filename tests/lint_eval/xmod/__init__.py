"""Receivers typed by helpers of other modules (returns.py): the factories live in
modules without ``async`` (parsed only because a chain reaches them)."""
from .factories import make_client as client_factory

__all__ = ["client_factory"]
