"""The typed error catalogue of polar (src/protocol/errors.ts): every error a
call can raise carries a stable ``code``, a ``retryable`` flag and optional
``details`` (for ``validation``: ``details["issues"]``, one per bad field)."""
from __future__ import annotations

from typing import Any

ERROR_CODES: dict[str, dict[str, Any]] = {
    "validation": {"http": 400, "retryable": False},
    "unknown_strategy": {"http": 400, "retryable": False},
    "payload_too_large": {"http": 413, "retryable": False},
    "unsupported_media_type": {"http": 415, "retryable": False},
    "unauthorized": {"http": 401, "retryable": False},
    "forbidden": {"http": 403, "retryable": False},
    "not_found": {"http": 404, "retryable": False},
    "conflict": {"http": 409, "retryable": False},
    "cancelled": {"http": 409, "retryable": False},
    "timeout": {"http": 504, "retryable": True},
    "upstream": {"http": 502, "retryable": True},
    "upstream_unavailable": {"http": 503, "retryable": True},
    "context_length": {"http": 400, "retryable": False},
    "runtime": {"http": 500, "retryable": True},
    "harness": {"http": 500, "retryable": False},
    "builder": {"http": 500, "retryable": False},
    "evaluator": {"http": 500, "retryable": False},
    "unavailable": {"http": 503, "retryable": True},
    "internal": {"http": 500, "retryable": False},
}


class PolarError(Exception):
    """An error from polar (or reaching it), as ``{code, message, retryable, details}``."""

    def __init__(self, code: str, message: str, retryable: bool | None = None, details: Any = None):
        super().__init__(f"{code}: {message}")
        self.code = code if code in ERROR_CODES else "internal"
        self.message = message
        self.retryable = ERROR_CODES[self.code]["retryable"] if retryable is None else bool(retryable)
        self.details = details

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> "PolarError":
        return cls(str(wire.get("code", "internal")), str(wire.get("message", "")), wire.get("retryable"), wire.get("details"))
