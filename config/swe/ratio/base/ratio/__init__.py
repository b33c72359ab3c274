"""Exact rational numbers."""
from .rational import Rational

__all__ = ["Rational"]
