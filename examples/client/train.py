"""A trainer in Python over NATS: submit, stream traces, GRPO group, slime samples.

    POLAR_NATS_URL=nats://127.0.0.1:4222 python examples/client/train.py
"""
import asyncio
import json
import os
import time

from polar_client import PolarClient, to_slime_samples


async def main():
    client = await PolarClient.connect(nats=os.environ.get("POLAR_NATS_URL", "nats://127.0.0.1:4222"))
    with open("config/tasks/demo-shell.json") as f:
        task = json.load(f) | {"task_id": f"demo-py-{int(time.time())}"}
    handle = await client.submit(task)
    async for m in handle.traces():  # each trace once, as the supervisor publishes it
        print("trace", m["session_id"], m["trace_index"], "of", m["trace_count"], len(m["trace"]["response_ids"]), "response tokens")
    group = await handle.group()
    for s in group.sessions:
        print(f"sample {s.sample_index}: {s.status} reward {s.reward} advantage {s.advantage:.3f} traces {len(s.traces)}")
    samples = to_slime_samples(group)
    print(len(samples), "slime samples; first:", {k: samples[0][k] for k in ("index", "response_length", "reward", "status")})
    await client.close()


asyncio.run(main())
