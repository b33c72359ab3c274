"""A task's results and traces from JetStream with replay and resume.

Each reader is an ephemeral pull consumer from a stream sequence; when the
connection drops, it is recreated from the sequence after the last message
read, so nothing is lost, and a (session, attempt, trace index) key makes
sure nothing is delivered twice. Filtered to the task's subjects and to the
sessions of this run of the task (a finished task id may be reused).
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterable

from nats.errors import ConnectionClosedError, Error as NatsError, NoRespondersError, TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from .codec import decode
from .errors import PolarError
from .subjects import BUCKET_BLOBS, HEADER_BLOB, STREAM_RESULTS, STREAM_TRACES, result_subject, trace_filter, trace_subject

FETCH_BATCH = 64
IDLE_S = 0.2
RECONNECT_GIVE_UP_S = 60.0


class TaskStreams:
    def __init__(self, nc):
        self.nc = nc
        self.js = nc.jetstream()
        self._blobs = None

    async def _body(self, data: bytes, headers: dict[str, str] | None) -> Any:
        value = decode(data, headers)
        if (headers or {}).get(HEADER_BLOB) != "1":
            return value
        if self._blobs is None:
            self._blobs = await self.js.object_store(BUCKET_BLOBS)
        blob = await self._blobs.get(value["blob"])
        return decode(blob.data)

    async def _read(self, stream: str, subject: str, from_seq: int | None) -> AsyncIterator[Any]:
        """Messages of `subject` from `from_seq`, in order; yields None when idle.

        Like an ordered consumer: with no acks, a message the server delivered
        into a connection that then died is gone from that consumer for good.
        So the consumer is created again from the sequence after the last
        message read whenever the client reconnected since it was created, or
        a consumer sequence was skipped (a delivery lost on the way)."""
        next_seq = max(1, from_seq or 1)
        lost_since = None
        while True:
            sub = None
            try:
                reconnects = self.nc.stats["reconnects"]
                sub = await self.js.pull_subscribe(
                    subject,
                    stream=stream,
                    config=ConsumerConfig(
                        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                        opt_start_seq=next_seq,
                        ack_policy=AckPolicy.NONE,
                        inactive_threshold=30.0,
                        mem_storage=True,
                        num_replicas=1,
                    ),
                )
                lost_since = None
                delivered = 0  # the consumer sequence of the last message taken
                while self.nc.stats["reconnects"] == reconnects:
                    try:
                        msgs = await sub.fetch(FETCH_BATCH, timeout=IDLE_S)
                    except NatsTimeout:
                        yield None
                        continue
                    for m in msgs:
                        if m.metadata.sequence.consumer != delivered + 1:
                            break  # a delivery was lost: start again after the last message taken
                        delivered += 1
                        seq = m.metadata.sequence.stream
                        if seq < next_seq:
                            continue
                        next_seq = seq + 1
                        yield m
                    else:
                        continue
                    break
            except (NatsError, ConnectionError, OSError) as err:
                # The connection dropped (or the consumer vanished with it): start again after the last message read.
                loop = asyncio.get_running_loop()
                lost_since = lost_since or loop.time()
                if self.nc.is_closed or loop.time() - lost_since > RECONNECT_GIVE_UP_S:
                    raise PolarError("unavailable", f"lost the NATS connection while reading {stream}: {err}") from err
                await asyncio.sleep(0.25)
                yield None
            finally:
                if sub is not None:
                    try:
                        await sub.unsubscribe()
                    except Exception:  # the consumer is ephemeral: the server drops it anyway
                        pass

    async def results(self, task_id: str, session_ids: Iterable[str], from_seq: int | None = None) -> AsyncIterator[dict]:
        """The first result of each session of the run, in stream order; ends when every session has one."""
        want = set(session_ids)
        seen: set[str] = set()
        if not want:
            return
        reader = self._read(STREAM_RESULTS, result_subject(task_id), from_seq)
        try:
            async for m in reader:
                if m is None:
                    continue
                r = await self._body(m.data, m.headers)
                if r.get("session_id") not in want or r["session_id"] in seen:
                    continue
                seen.add(r["session_id"])
                yield {**r, "seq": m.metadata.sequence.stream}
                if seen == want:
                    return
        finally:
            await reader.aclose()

    async def traces(self, task_id: str, session_ids: Iterable[str], from_seq: int | None = None) -> AsyncIterator[dict]:
        """Every trace of the run from `from_seq`, each once; ends when every
        session has reported and all its traces were passed."""
        want = set(session_ids)
        expected: dict[str, int] = {}
        last_seq: dict[str, int] = {}

        async def follow_results():
            async for r in self.results(task_id, want):
                expected[r["session_id"]] = len(r["trajectory"].get("traces") or [])

        follower = asyncio.create_task(follow_results())
        position = max(1, from_seq or 1) - 1
        delivered: set[tuple] = set()
        reader = self._read(STREAM_TRACES, trace_filter(task_id), from_seq)
        try:
            if len(want) == 0:
                return
            async for m in reader:
                if follower.done() and not follower.cancelled() and follower.exception() is not None:
                    raise follower.exception()
                if m is not None:
                    seq = m.metadata.sequence.stream
                    position = max(position, seq)
                    body = await self._body(m.data, m.headers)
                    if body.get("session_id") in want:
                        if body["trace_index"] == body["trace_count"] - 1:
                            last_seq[body["session_id"]] = seq
                        key = (body["session_id"], body["attempt"], body["trace_index"])
                        if key not in delivered:
                            delivered.add(key)
                            yield {**body, "seq": seq}
                if len(expected) == len(want) and await self._all_published(task_id, expected, last_seq, position, lookup=m is None):
                    return
        finally:
            follower.cancel()
            await reader.aclose()

    async def _all_published(self, task_id: str, expected: dict, last_seq: dict, position: int, lookup: bool) -> bool:
        for sid, count in expected.items():
            if count == 0 or sid in last_seq:
                continue
            if not lookup:
                return False
            try:
                raw = await self.js.get_last_msg(STREAM_TRACES, trace_subject(task_id, sid))
            except (NotFoundError, NatsTimeout, ConnectionClosedError, NoRespondersError):
                return False  # not published yet, or NATS unreachable: asked again when next idle
            body = await self._body(raw.data, raw.headers)
            if body["trace_index"] != body["trace_count"] - 1:
                return False
            last_seq[sid] = raw.seq
        return all(last_seq[s] <= position for s, c in expected.items() if c > 0)
