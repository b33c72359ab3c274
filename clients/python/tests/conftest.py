"""The real stack for the client tests: `polar up` (embedded nats-server,
supervisor with its HTTP API, one gateway, the sim) as a child process, and
helpers to build tasks and cut NATS connections."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHAT_CLIENT = ROOT / "config" / "examples" / "chat-client.mjs"


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """Starts `node bin/polar.js up --http-port 0` and yields its URLs; the
    trainer's NATS credentials from its state file go into POLAR_NATS_USER/_PASSWORD."""
    state = tmp_path_factory.mktemp("polar-up") / "up.json"
    proc = subprocess.Popen(
        ["node", str(ROOT / "bin" / "polar.js"), "up", "--http-port", "0", "--log-level", "warn"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "POLAR_STATE_FILE": str(state)},
    )
    urls: dict[str, str] = {}
    lines: list[str] = []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.match(r"\s+(NATS|task API)\s+(\S+)", line)
        if m:
            urls["nats" if m.group(1) == "NATS" else "api"] = m.group(2)
        if line.startswith("ready"):
            break
    if set(urls) != {"nats", "api"}:
        proc.kill()
        raise RuntimeError("polar up did not start:\n" + "".join(lines))
    trainer = (json.loads(state.read_text()).get("nats_credentials") or {}).get("trainer") or {}
    for k, env in (("user", "POLAR_NATS_USER"), ("password", "POLAR_NATS_PASSWORD"), ("token", "POLAR_NATS_TOKEN")):
        if trainer.get(k):
            os.environ[env] = trainer[k]
    # Keep draining its output so the child never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    yield urls
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def shell_task(task_id: str, num_samples: int = 4, command_suffix: str = "", turns: int = 2, delay_ms: int = 0) -> dict:
    """2 model calls per session (per_request: one trace each); samples 0 and 1 get reward 1, the others 0."""
    return {
        "task_id": task_id,
        "instruction": f"Task {task_id}: say hello.",
        "num_samples": num_samples,
        "timeout_seconds": 60,
        "runtime": {"backend": "local"},
        "agent": {
            "harness": "shell",
            "custom_shell": {
                "command": f"node {json.dumps(str(CHAT_CLIENT))} && echo $POLAR_SAMPLE_INDEX > idx.txt{command_suffix}",
                "env": {"TURNS": str(turns), "DELAY_MS": str(delay_ms)},
            },
        },
        "builder": {"strategy": "per_request"},
        "evaluator": {"strategy": "command", "config": {"command": 'test "$(cat idx.txt)" -lt 2'}},
    }


class TcpProxy:
    """A TCP relay whose live connections a test can cut (clients reconnect
    through it), or first blackhole: what the server sends on them is dropped,
    as bytes in flight are when a connection dies."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.writers: set[asyncio.StreamWriter] = set()
        self.clients: set[asyncio.StreamWriter] = set()  # the client side of each live connection
        self.muted: set[asyncio.StreamWriter] = set()
        self.dropped = bytearray()  # what blackholed connections did not pass on
        self.server = None
        self.port = 0

    async def start(self) -> "TcpProxy":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers.update((writer, up_writer))
        self.clients.add(writer)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    if w in self.muted:
                        self.dropped += data
                        continue
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers.difference_update((writer, up_writer))
        self.clients.discard(writer)
        self.muted.discard(writer)

    def blackhole(self) -> int:
        """From now on, drop what the server sends on the live connections."""
        self.muted |= self.clients
        return len(self.muted)

    def cut(self) -> int:
        n = len(self.writers)
        for w in list(self.writers):
            w.transport.abort()
        self.writers.clear()
        self.clients.clear()
        self.muted.clear()
        return n

    async def stop(self):
        self.cut()
        self.server.close()
        await self.server.wait_closed()
