"""NATS names, as src/protocol/subjects.ts builds them (ids encoded injectively:
``_`` -> ``_5F_``, ``.`` -> ``_2E_``)."""
from __future__ import annotations

import re

from .errors import PolarError

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

STREAM_RESULTS = "POLAR_RESULTS"
STREAM_TRACES = "POLAR_TRACES"
BUCKET_BLOBS = "polar_blobs"
API_SUBMIT = "polar.api.task.submit"
API_GET = "polar.api.task.get"
API_CANCEL = "polar.api.task.cancel"
API_INFERENCE_PAUSE = "polar.api.inference.pause"
API_INFERENCE_RESUME = "polar.api.inference.resume"
HEADER_CONTENT_TYPE = "content-type"
HEADER_BLOB = "polar-blob"
MSGPACK = "application/msgpack"
JSON = "application/json"


def id_token(kind: str, value: str) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise PolarError("validation", f"{kind} {value!r} is not a valid id", details={"issues": [{"path": kind, "message": "not a valid id"}]})
    return value.replace("_", "_5F_").replace(".", "_2E_")


def result_subject(task_id: str) -> str:
    return f"polar.session.result.{id_token('task_id', task_id)}"


def trace_subject(task_id: str, session_id: str) -> str:
    return f"polar.trace.{id_token('task_id', task_id)}.{id_token('session_id', session_id)}"


def trace_filter(task_id: str) -> str:
    return f"polar.trace.{id_token('task_id', task_id)}.>"
