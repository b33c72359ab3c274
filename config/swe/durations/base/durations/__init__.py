"""Human-readable durations."""
from .format import format_duration

__all__ = ["format_duration"]
