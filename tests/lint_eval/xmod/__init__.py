"""Receivers typed by helpers of other modules (returns.py): the factories live in
modules without ``async`` (parsed only because a chain reaches them)."""
from .bases import Middle
from .factories import make_client as client_factory

__all__ = ["Middle", "client_factory"]
