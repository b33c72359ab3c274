"""The trainer's client (asyncio), mirroring the TypeScript ``PolarClient``:

    client = await PolarClient.connect(nats="nats://host:4222")   # or api="http://host:port"
    handle = await client.submit(task)
    async for r in handle.results(): ...
    async for m in handle.traces(): ...
    group = await handle.group()
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from .grpo import FINAL_TASK_STATES, Group, build_group
from .status_pages import read_all_sessions


class TaskHandle:
    def __init__(self, transport, task_id: str, total_sessions: int, sessions: list[dict] | None = None):
        self._t = transport
        self.task_id = task_id
        self.total_sessions = total_sessions
        self._sessions = sessions

    def __repr__(self) -> str:
        return f"TaskHandle(task_id={self.task_id!r}, total_sessions={self.total_sessions})"

    async def _read_all(self, first: dict | None = None) -> dict:
        return await read_all_sessions(self._t, self.task_id, self._t.status_page_size, first)

    async def _session_ids(self) -> list[str]:
        """The sessions of this run of the task (read once, every status page, and kept)."""
        if self._sessions is None:
            self._sessions = (await self._read_all())["sessions"]
        return [s["session_id"] for s in self._sessions]

    async def status(self) -> dict:
        """The task's status now (TaskStatus: status, counts, every session's summary, read page by page)."""
        return await self._read_all()

    async def results(self, from_seq: int | None = None) -> AsyncIterator[dict]:
        """Each session's SessionResult (plus its stream ``seq``) as it lands; replayed for a finished task."""
        async for r in self._t.results(self.task_id, await self._session_ids(), from_seq):
            yield r

    async def traces(self, from_seq: int | None = None) -> AsyncIterator[dict]:
        """Every trace of the task exactly once: ``{task_id, session_id, trace_index,
        trace_count, status, attempt, trace, seq}``; ``from_seq=m["seq"] + 1`` resumes after ``m``."""
        async for m in self._t.traces(self.task_id, await self._session_ids(), from_seq):
            yield m

    async def group(self, normalize_std: bool = True) -> Group:
        """Waits until every session has ended; the GRPO group with advantages."""
        traces = [m async for m in self.traces()]
        st = await self._final_status()
        return build_group(self.task_id, st["status"], st["sessions"], traces, normalize_std)

    async def wait(self) -> dict:
        """The final TaskStatus, once every session has reported."""
        async for _ in self.results():
            pass
        return await self._final_status()

    async def _final_status(self) -> dict:
        # Every session has reported; the supervisor records the last results moments later.
        # Reads the first status page until the task is final, then the other pages.
        delay = 0.005
        while True:
            first = await self._t.get(self.task_id, offset=0, limit=self._t.status_page_size)
            if first["status"] in FINAL_TASK_STATES:
                return await self._read_all(first)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def cancel(self) -> dict:
        """Cancels the unfinished sessions (they end as ERROR with zeroed masks); the status then, with every session."""
        return await self._read_all(await self._t.cancel(self.task_id))


class PolarClient:
    def __init__(self, transport):
        self._t = transport

    @classmethod
    async def connect(
        cls, nats: str | None = None, api: str | None = None, timeout: float = 30.0, auth: dict | None = None,
        token: str | None = None, status_page_size: int | None = None,
    ) -> "PolarClient":
        """Over NATS (``nats="nats://host:4222"``; needs nats-py; ``auth={"user", "password"}``
        or ``{"token"}`` or ``{"creds_file"}``, default from POLAR_NATS_*) or the HTTP API only
        (``api="http://host:port"``; standard library only; ``token`` default POLAR_API_TOKEN).
        ``timeout``: each task API request (seconds). ``status_page_size``: session summaries
        per status request when reading a task's sessions (default 1000, at most 10000; over
        NATS also no more than fit in one message)."""
        if (nats is None) == (api is None):
            raise TypeError("PolarClient.connect needs exactly one of nats= or api=")
        if nats is not None:
            from .nats_transport import NatsTransport  # imported here so the HTTP path needs no nats-py

            return cls(await NatsTransport.connect(nats, timeout, auth=auth, page_size=status_page_size))
        from .http_transport import HttpTransport

        return cls(HttpTransport(api, timeout, token, page_size=status_page_size))

    async def submit(self, task: dict[str, Any]) -> TaskHandle:
        """Submits a TaskRequest; a bad one raises PolarError(code="validation") naming every bad field."""
        reply = await self._t.submit(task)
        return TaskHandle(self._t, reply["task_id"], reply["total_sessions"])

    async def task(self, task_id: str) -> TaskHandle:
        """A handle on an existing task (also one that finished long ago); PolarError(code="not_found") if unknown."""
        st = await read_all_sessions(self._t, task_id, self._t.status_page_size)
        return TaskHandle(self._t, st["task_id"], st["total_sessions"], st["sessions"])

    async def pause(self, timeout_s: float | None = None) -> dict:
        """Weight sync: every gateway holds new model calls (the agents just wait) and
        drains the ones in flight (bounded by ``timeout_s``). Answers per node what was
        drained and held; pausing a paused cluster is idempotent (``unchanged: True``)."""
        return await self._t.pause({} if timeout_s is None else {"timeout_seconds": timeout_s})

    async def resume(self, policy_version: int) -> dict:
        """Releases the held calls under ``policy_version`` (an integer that never goes
        down: a lower one raises PolarError(code="conflict"))."""
        return await self._t.resume({"policy_version": policy_version})

    async def close(self) -> None:
        await self._t.close()

    async def __aenter__(self) -> "PolarClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
