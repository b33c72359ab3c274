"""The client over NATS: request/reply for the task API (msgpack), JetStream for results and traces."""
from __future__ import annotations

from typing import Any

import asyncio
import os

import nats
from nats.errors import Error as NatsError, NoRespondersError, TimeoutError as NatsTimeout

from .codec import decode, encode
from .errors import PolarError
from .nats_streams import TaskStreams
from .status_pages import status_page_size
from .subjects import API_CANCEL, API_GET, API_INFERENCE_PAUSE, API_INFERENCE_RESUME, API_SUBMIT, HEADER_CONTENT_TYPE, MSGPACK


#: How long close() waits for the server to take the connection's last bytes.
CLOSE_TIMEOUT_S = 5.0
#: Room in a message for the reply envelope and the task's counters.
REPLY_HEADROOM = 16 * 1024
#: The most one session summary takes in a status reply (its error is capped at 2,000 characters, its ids at 128).
MAX_SUMMARY_BYTES = 2560


def nats_auth(auth: dict | None) -> dict:
    """nats-py connect options from ``{user, password}``, ``{token}`` or ``{creds_file}``;
    without ``auth``, from POLAR_NATS_USER/_PASSWORD/_TOKEN/_CREDS (as the CLI)."""
    a = auth if auth is not None else {
        "user": os.environ.get("POLAR_NATS_USER"),
        "password": os.environ.get("POLAR_NATS_PASSWORD"),
        "token": os.environ.get("POLAR_NATS_TOKEN"),
        "creds_file": os.environ.get("POLAR_NATS_CREDS"),
    }
    out: dict = {}
    if a.get("user"):
        out["user"], out["password"] = a["user"], a.get("password") or ""
    if a.get("token"):
        out["token"] = a["token"]
    if a.get("creds_file"):
        out["user_credentials"] = a["creds_file"]
    return out


class NatsTransport:
    def __init__(self, nc, timeout: float = 30.0, owned: bool = True, page_size: int | None = None):
        self.nc = nc
        self.timeout = timeout
        self.owned = owned
        self.streams = TaskStreams(nc)
        # A reply larger than the server's max_payload is never delivered: the request would only time out.
        fits = ((nc.max_payload or 1024 * 1024) - REPLY_HEADROOM) // MAX_SUMMARY_BYTES
        self.status_page_size = max(1, min(status_page_size(page_size), fits))

    @classmethod
    async def connect(cls, servers: str, timeout: float = 30.0, name: str = "polar-client-py", connect_timeout: float = 5.0, auth: dict | None = None, page_size: int | None = None) -> "NatsTransport":
        # Reconnects forever once connected; the first connect is bounded (nats-py would retry it forever too).
        status_page_size(page_size)
        creds = nats_auth(auth)
        try:
            nc = await asyncio.wait_for(
                nats.connect(servers, name=name, max_reconnect_attempts=-1, reconnect_time_wait=0.25, connect_timeout=2, **creds),
                connect_timeout,
            )
        except Exception as err:  # nats-py raises several types for an unreachable server; wait_for a TimeoutError
            raise PolarError("unavailable", f"cannot connect to NATS at {servers}: {err}") from err
        return cls(nc, timeout, page_size=page_size)

    async def request(self, subject: str, body: Any) -> Any:
        try:
            msg = await self.nc.request(subject, encode(body), timeout=self.timeout, headers={HEADER_CONTENT_TYPE: MSGPACK})
        except NoRespondersError as err:
            raise PolarError("unavailable", f"nothing serves {subject} (is the supervisor running?)") from err
        except NatsTimeout as err:
            raise PolarError("timeout", f"no answer on {subject} within {self.timeout} s") from err
        except NatsError as err:  # closed, draining, or too much buffered while reconnecting
            raise PolarError("unavailable", f"cannot send {subject}: {err}") from err
        try:
            reply = decode(msg.data, msg.headers)
        except ValueError as err:  # msgpack's and json's decode errors both are ValueErrors
            raise PolarError("internal", f"malformed reply on {subject}: {err}") from err
        if isinstance(reply, dict) and reply.get("ok") is True:
            return reply.get("data")
        if isinstance(reply, dict) and reply.get("ok") is False:
            raise PolarError.from_wire(reply.get("error") or {})
        raise PolarError("internal", f"malformed reply on {subject}")

    async def submit(self, task: dict) -> dict:
        return await self.request(API_SUBMIT, task)

    async def get(self, task_id: str, offset: int | None = None, limit: int | None = None) -> dict:
        """One status page (the API's default page without ``offset``/``limit``)."""
        page = {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
        return await self.request(API_GET, {"task_id": task_id, **page})

    async def cancel(self, task_id: str) -> dict:
        return await self.request(API_CANCEL, {"task_id": task_id})

    async def pause(self, body: dict) -> dict:
        return await self.request(API_INFERENCE_PAUSE, body)

    async def resume(self, body: dict) -> dict:
        return await self.request(API_INFERENCE_RESUME, body)

    def results(self, task_id: str, session_ids, from_seq=None):
        return self.streams.results(task_id, session_ids, from_seq)

    def traces(self, task_id: str, session_ids, from_seq=None):
        return self.streams.traces(task_id, session_ids, from_seq)

    async def close(self) -> None:
        """Closes the connection this client opened. Not a drain: every request
        was answered (or timed out) and every reader unsubscribed already, so
        there is nothing in flight; and nats-py's drain flushes with a PING
        whose PONG is forgotten when the connection drops and comes back, so
        closing just after a drop would wait out its 10 s flush timeout."""
        if not self.owned or self.nc.is_closed:
            return
        try:
            await asyncio.wait_for(self.nc.close(), CLOSE_TIMEOUT_S)
        except (NatsError, OSError, asyncio.TimeoutError):
            # The socket is gone already (reset by the peer) or the peer does not take the last bytes:
            # the transport is closed either way, only the wait for the peer is given up.
            pass
