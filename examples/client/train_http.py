"""A trainer with nothing but HTTP and the Python standard library (no nats-py needed).

    POLAR_API_URL=http://127.0.0.1:8080 python examples/client/train_http.py
"""
import asyncio
import json
import os
import time

from polar_client import PolarClient


async def main():
    client = await PolarClient.connect(api=os.environ.get("POLAR_API_URL", "http://127.0.0.1:8080"))
    with open("config/tasks/demo-shell.json") as f:
        task = json.load(f) | {"task_id": f"demo-http-{int(time.time())}"}
    handle = await client.submit(task)
    async for r in handle.results():  # server-sent events from GET /rollout/task/{id}/results
        print("result", r["session_id"], r["status"])
    group = await handle.group()  # traces from GET /rollout/task/{id}/traces
    print([(s.sample_index, s.reward, round(s.advantage, 3), len(s.traces)) for s in group.sessions])
    await client.close()


asyncio.run(main())
