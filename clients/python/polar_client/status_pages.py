"""A task's whole status from the paged status API: the session summaries come
one page at a time (``offset``/``limit``, at most 10,000 per page, 1,000 by
default), so the client reads pages until it holds every session of the run
(as src/client/status-pages.ts)."""
from __future__ import annotations

from .errors import PolarError

#: Session summaries per status request unless the client is told otherwise.
DEFAULT_STATUS_PAGE_SIZE = 1000
#: The API's page bound (and the most sessions a task may have).
MAX_STATUS_PAGE_SIZE = 10_000
#: Reads restarted because the task id was resubmitted (a new run) between two pages.
MAX_RESTARTS = 3


def status_page_size(value: int | None) -> int:
    """Checks a ``status_page_size`` option: an integer in [1, 10000] (default 1000)."""
    if value is None:
        return DEFAULT_STATUS_PAGE_SIZE
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STATUS_PAGE_SIZE:
        raise PolarError(
            "validation", f"status_page_size must be an integer in [1, {MAX_STATUS_PAGE_SIZE}], got {value!r}",
            details={"issues": [{"path": "status_page_size", "message": f"must be an integer in [1, {MAX_STATUS_PAGE_SIZE}]"}]},
        )
    return value


async def read_all_sessions(transport, task_id: str, page_size: int, first: dict | None = None) -> dict:
    """The task's status with every session summary in sample order: ``first`` (a
    page already read, e.g. the one that showed the task final) and then the
    following pages. Pages of one run only: when the task id is resubmitted
    while reading, the read starts over. For a running task the pages are read
    one after the other, not as one snapshot."""
    for _ in range(MAX_RESTARTS + 1):
        if first is None:
            first = await transport.get(task_id, offset=0, limit=page_size)
        sessions = await _rest_of_run(transport, task_id, first, page_size)
        if sessions is not None:
            return {**first, "sessions": sessions, "offset": 0, "limit": len(sessions)}
        first = None
    raise PolarError("conflict", f"task {task_id} was resubmitted {MAX_RESTARTS + 1} times while its sessions were read", details={"task_id": task_id})


async def _rest_of_run(transport, task_id: str, first: dict, page_size: int) -> list[dict] | None:
    if (first.get("offset") or 0) != 0:
        raise PolarError("internal", f"the first status page of task {task_id} starts at offset {first.get('offset')}, not 0")
    total = first["total_sessions"]
    sessions = list(first.get("sessions") or [])
    while len(sessions) < total:
        page = await transport.get(task_id, offset=len(sessions), limit=page_size)
        if page.get("created_at") != first.get("created_at") or page["total_sessions"] != total:
            return None
        if not page.get("sessions"):
            raise PolarError("internal", f"the status of task {task_id} has no sessions from offset {len(sessions)} of {total}")
        sessions.extend(page["sessions"])
    # Each sample index exactly once, in order (the API pages by sample index).
    for i, s in enumerate(sessions):
        if s.get("sample_index") != i:
            raise PolarError(
                "internal", f"the status of task {task_id} has sample {s.get('sample_index')} at position {i}",
                details={"task_id": task_id, "position": i, "sample_index": s.get("sample_index")},
            )
    if len(sessions) != total:
        raise PolarError("internal", f"the status of task {task_id} lists {len(sessions)} sessions, not {total}")
    return sessions
