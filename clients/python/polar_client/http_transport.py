"""The client over the supervisor's HTTP API with the standard library only:
JSON for the task API, server-sent events for results and traces
(``GET /rollout/task/{id}/results|traces``), resumed with ``?from_seq=`` after
a dropped connection. Blocking socket reads run in a worker thread."""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, AsyncIterator

from .errors import PolarError
from .status_pages import status_page_size

MAX_RECONNECTS = 10


class HttpTransport:
    def __init__(self, api: str, timeout: float = 30.0, token: str | None = None, page_size: int | None = None):
        self.status_page_size = status_page_size(page_size)
        self.base = api.rstrip("/")
        token = token if token is not None else os.environ.get("POLAR_API_TOKEN")
        self._auth = {"authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        u = urllib.parse.urlsplit(self.base)
        self._host, self._port, self._prefix = u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80), u.path
        self._https = u.scheme == "https"

    def _json_sync(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method, headers={**self._auth, "content-type": "application/json"} if data else dict(self._auth))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                raw = res.read()
        except urllib.error.HTTPError as err:
            raise _from_http(err.code, err.read()) from None
        except (TimeoutError, urllib.error.URLError, OSError) as err:
            if isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError):
                raise PolarError("timeout", f"no answer from {method} {self.base}{path} within {self.timeout} s") from err
            raise PolarError("unavailable", f"cannot reach the polar API at {self.base}: {err}") from err
        except http.client.HTTPException as err:  # e.g. the connection closed mid-reply
            raise PolarError("unavailable", f"lost the polar API at {self.base}: {err}") from err
        try:
            return json.loads(raw or b"{}")
        except ValueError as err:
            raise PolarError("internal", f"{method} {self.base}{path} answered with a body that is not JSON") from err

    async def _json(self, method: str, path: str, body: Any = None) -> Any:
        return await asyncio.to_thread(self._json_sync, method, path, body)

    async def submit(self, task: dict) -> dict:
        return await self._json("POST", "/rollout/task/submit", task)

    async def get(self, task_id: str, offset: int | None = None, limit: int | None = None) -> dict:
        """One status page (the API's default page without ``offset``/``limit``)."""
        page = {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
        query = f"?{urllib.parse.urlencode(page)}" if page else ""
        return await self._json("GET", f"/rollout/task/{urllib.parse.quote(task_id, safe='')}{query}")

    async def cancel(self, task_id: str) -> dict:
        return await self._json("DELETE", f"/rollout/task/{urllib.parse.quote(task_id, safe='')}")

    async def pause(self, body: dict) -> dict:
        return await self._json("POST", "/rollout/inference/pause", body)

    async def resume(self, body: dict) -> dict:
        return await self._json("POST", "/rollout/inference/resume", body)

    def results(self, task_id: str, _session_ids=None, from_seq=None):
        return self._events(task_id, "results", "result", from_seq, lambda r: r["session_id"])

    def traces(self, task_id: str, _session_ids=None, from_seq=None):
        return self._events(task_id, "traces", "trace", from_seq, lambda m: (m["session_id"], m["attempt"], m["trace_index"]))

    def _open(self, path: str):
        conn = (http.client.HTTPSConnection if self._https else http.client.HTTPConnection)(self._host, self._port, timeout=self.timeout)
        conn.request("GET", self._prefix + path, headers={**self._auth, "accept": "text/event-stream"})
        return conn, conn.getresponse()

    async def _events(self, task_id: str, what: str, kind: str, from_seq, key) -> AsyncIterator[dict]:
        seen = set()
        next_seq = from_seq or 0
        failures = 0
        path = f"/rollout/task/{urllib.parse.quote(task_id, safe='')}/{what}"
        while True:
            try:
                conn, res = await asyncio.to_thread(self._open, path + (f"?from_seq={next_seq}" if next_seq > 0 else ""))
            except OSError as err:
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise PolarError("unavailable", f"lost {self.base}{path}: {err}") from err
                await asyncio.sleep(0.1 * 2 ** min(failures, 6))
                continue
            try:
                if res.status != 200:
                    raise _from_http(res.status, await asyncio.to_thread(res.read))
                async for event, data in _read_sse(res):
                    if event == "end":
                        return
                    if event == "error":
                        raise PolarError.from_wire(json.loads(data))
                    if event != kind:
                        continue
                    value = json.loads(data)
                    next_seq = max(next_seq, value["seq"] + 1)
                    failures = 0
                    k = key(value)
                    if k in seen:
                        continue
                    seen.add(k)
                    yield value
            except (OSError, http.client.HTTPException) as err:
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise PolarError("unavailable", f"lost {self.base}{path}: {err}") from err
            finally:
                conn.close()
            # The stream ended without `end`: the connection dropped; resume after the last event.

    async def close(self) -> None:
        return None


async def _read_sse(res) -> AsyncIterator[tuple[str, str]]:
    event, data = "message", []
    while True:
        line = await asyncio.to_thread(res.readline)
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if not line:
            if data or event != "message":
                yield event, "\n".join(data)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)


def _from_http(status: int, raw: bytes) -> PolarError:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return PolarError.from_wire(body["error"])
    return PolarError("not_found" if status == 404 else "internal", f"HTTP {status} from the polar API")
