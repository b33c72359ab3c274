"""Message bodies as polar puts them on NATS: msgpack (JSON when the header says so)."""
from __future__ import annotations

import json
from typing import Any

import msgpack

from .subjects import HEADER_CONTENT_TYPE, JSON


def encode(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def decode(data: bytes, headers: dict[str, str] | None = None) -> Any:
    if not data:
        return None
    if (headers or {}).get(HEADER_CONTENT_TYPE, "").startswith(JSON):
        return json.loads(data)
    return msgpack.unpackb(data, raw=False, strict_map_key=False)
