"""polar_client against the real stack: submit, results, traces with replay
and resume, the GRPO group, cancel and typed errors, over NATS and over the
HTTP API only, a NATS connection cut mid-stream, and slime samples."""
from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap

import pytest

from polar_client import SLIME_SAMPLE_FIELDS, PolarClient, PolarError, grpo_advantages, to_slime_samples

from conftest import TcpProxy, shell_task


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))  # generous: CI machines may be heavily shared


def key(m):
    return (m["session_id"], m["attempt"], m["trace_index"])


def test_nats_results_traces_group(stack):
    async def main():
        async with await PolarClient.connect(nats=stack["nats"]) as client:
            h = await client.submit(shell_task("py-nats"))
            assert h.total_sessions == 4

            async def collect(it):
                return [x async for x in it]

            results, traces = await asyncio.gather(collect(h.results()), collect(h.traces()))
            assert len({r["session_id"] for r in results}) == 4
            assert all(r["status"] == "COMPLETED" for r in results)
            assert len(traces) == 8 and len({key(m) for m in traces}) == 8
            for m in traces:
                r = next(r for r in results if r["session_id"] == m["session_id"])
                assert m["trace"]["response_ids"] == r["trajectory"]["traces"][m["trace_index"]]["response_ids"]
                assert m["trace"]["loss_mask"] == [1] * len(m["trace"]["response_ids"])
            g = await h.group()
            assert g.status == "completed"
            assert [s.sample_index for s in g.sessions] == [0, 1, 2, 3]
            assert [s.reward for s in g.sessions] == [1, 1, 0, 0]
            assert [len(s.traces) for s in g.sessions] == [2, 2, 2, 2]
            assert g.sessions[0].advantage == pytest.approx(1, abs=1e-4)
            assert g.sessions[3].advantage == pytest.approx(-1, abs=1e-4)
            assert g.stale_traces == 0

    run(main())


def test_replay_after_finish_and_resume_from_seq(stack):
    async def main():
        async with await PolarClient.connect(nats=stack["nats"]) as first:
            h = await first.submit(shell_task("py-replay", 3))
            everything = [m async for m in h.traces()]
        assert len(everything) == 6
        async with await PolarClient.connect(nats=stack["nats"]) as later:
            h = await later.task("py-replay")
            replay = [m async for m in h.traces()]
            assert sorted(map(key, replay)) == sorted(map(key, everything))
            seqs = [m["seq"] for m in replay]
            assert seqs == sorted(seqs)
            rest = [m async for m in h.traces(from_seq=seqs[2] + 1)]
            assert [m["seq"] for m in rest] == seqs[3:]
            assert [m async for m in h.traces(from_seq=seqs[-1] + 1)] == []
            assert len((await h.group()).sessions) == 3

    run(main())


def test_http_only(stack):
    async def main():
        async with await PolarClient.connect(api=stack["api"]) as client:
            h = await client.submit(shell_task("py-http", 2))
            results = [r async for r in h.results()]
            traces = [m async for m in h.traces()]
            assert sorted(r["session_id"] for r in results) == sorted(s["session_id"] for s in (await h.status())["sessions"])
            assert len(traces) == 4 and len({key(m) for m in traces}) == 4
            g = await h.group()
            assert [(s.reward, s.advantage) for s in g.sessions] == [(1, 0), (1, 0)]
            rest = [m async for m in h.traces(from_seq=traces[1]["seq"] + 1)]
            assert list(map(key, rest)) == list(map(key, traces[2:]))

    run(main())


def test_http_path_needs_only_the_standard_library(stack):
    """The HTTP path in a process where importing nats or msgpack fails."""
    run(_submit_and_wait(stack, shell_task("py-stdlib", 2)))
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        sys.modules["nats"] = None
        sys.modules["msgpack"] = None
        from polar_client.client import PolarClient
        async def main():
            client = await PolarClient.connect(api={stack["api"]!r})
            g = await (await client.task("py-stdlib")).group()
            print(json.dumps([[s.sample_index, s.status, len(s.traces)] for s in g.sessions]))
        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [[0, "COMPLETED", 2], [1, "COMPLETED", 2]]


async def _submit_and_wait(stack, task):
    async with await PolarClient.connect(nats=stack["nats"]) as client:
        return await (await client.submit(task)).wait()


def test_unknown_task_and_bad_task_are_typed_errors(stack):
    async def main():
        for kw in ({"nats": stack["nats"]}, {"api": stack["api"]}):
            async with await PolarClient.connect(**kw) as client:
                with pytest.raises(PolarError) as e:
                    await client.task("no-such-task")
                assert (e.value.code, e.value.retryable) == ("not_found", False)
                with pytest.raises(PolarError) as e:
                    await client.submit({"task_id": "bad task", "instruction": "x"})
                assert e.value.code == "validation"
                assert any(i["path"].startswith("agent") for i in e.value.details["issues"])
        with pytest.raises(PolarError) as e:
            await PolarClient.connect(nats="nats://127.0.0.1:1")
        assert (e.value.code, e.value.retryable) == ("unavailable", True)

    run(main())


def test_cancel(stack):
    async def main():
        async with await PolarClient.connect(nats=stack["nats"]) as client:
            h = await client.submit(shell_task("py-cancel", 2, delay_ms=20000))
            await asyncio.sleep(0.3)
            st = await h.cancel()
            assert st["status"] in ("cancelling", "cancelled")
            g = await h.group()
            assert g.status == "cancelled"
            assert [s.status for s in g.sessions] == ["ERROR", "ERROR"]
            assert [s.reward for s in g.sessions] == [0, 0]

    run(main())


def spy_pages(client) -> list[tuple]:
    """Records the (offset, limit) of every status request the client's transport sends."""
    pages: list[tuple] = []
    get = client._t.get

    async def recording_get(task_id, offset=None, limit=None):
        pages.append((offset, limit))
        return await get(task_id, offset=offset, limit=limit)

    client._t.get = recording_get
    return pages


def test_group_over_several_status_pages(stack):
    """5 sessions, 2 summaries per status request: pages at offsets 0, 2 and 4;
    group(), wait(), status() and task() hold every session exactly once."""
    rewards = [1, 1, 0, 0, 0]
    mean = sum(rewards) / 5
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 5)

    async def main():
        async with await PolarClient.connect(nats=stack["nats"], status_page_size=2) as client:
            pages = spy_pages(client)
            h = await client.submit(shell_task("py-paged", 5, turns=1))
            g = await h.group()
            assert g.status == "completed"
            assert [s.sample_index for s in g.sessions] == list(range(5))
            assert len({s.session_id for s in g.sessions}) == 5
            assert [s.reward for s in g.sessions] == rewards
            assert [s.advantage for s in g.sessions] == pytest.approx([(r - mean) / (std + 1e-6) for r in rewards], abs=1e-6)
            assert [len(s.traces) for s in g.sessions] == [1] * 5
            ids = [s.session_id for s in g.sessions]
            assert [s["session_id"] for s in (await h.wait())["sessions"]] == ids
            # The sessions before the first stream read, the final status of group() and of wait(): three pages each.
            assert all(limit == 2 and offset in (0, 2, 4) for offset, limit in pages)
            assert sum(offset == 4 for offset, _ in pages) == 3
        async with await PolarClient.connect(api=stack["api"], status_page_size=2) as client:
            pages = spy_pages(client)
            again = await client.task("py-paged")
            assert again.total_sessions == 5
            st = await again.status()
            assert [s["session_id"] for s in st["sessions"]] == ids
            assert (st["offset"], st["limit"]) == (0, 5)
            g2 = await again.group()
            assert [(s.session_id, s.reward, s.advantage) for s in g2.sessions] == [(s.session_id, s.reward, s.advantage) for s in g.sessions]
            assert {offset for offset, _ in pages} == {0, 2, 4}

    run(main())


def test_status_page_size_outside_bounds_is_a_validation_error(stack):
    async def main():
        for size in (0, 10_001, 2.5, True):
            for kw in ({"nats": stack["nats"]}, {"api": stack["api"]}):
                with pytest.raises(PolarError) as e:
                    await PolarClient.connect(**kw, status_page_size=size)
                assert e.value.code == "validation"
                assert "status_page_size" in e.value.message

    run(main())


def test_nats_connection_cut_mid_stream(stack):
    async def main():
        await _submit_and_wait(stack, shell_task("py-cut", 4, turns=3))
        host, port = stack["nats"].removeprefix("nats://").split(":")
        proxy = await TcpProxy(host, int(port)).start()
        try:
            async with await PolarClient.connect(nats=f"nats://127.0.0.1:{proxy.port}") as client:
                h = await client.task("py-cut")
                got = []
                async for m in h.traces():
                    got.append(m)
                    if len(got) == 3:
                        assert proxy.cut() > 0
                assert len(got) == 12
                assert len({key(m) for m in got}) == 12
                assert len({m["seq"] for m in got}) == 12
                # Once the client is back through the proxy, cut again before a reader starts:
                # its consumer is created again after the reconnect.
                deadline = asyncio.get_running_loop().time() + 60
                while not proxy.writers:
                    assert asyncio.get_running_loop().time() < deadline, "the client did not reconnect"
                    await asyncio.sleep(0.05)
                assert proxy.cut() > 0
                again = [m async for m in h.traces()]
                assert sorted(map(key, again)) == sorted(map(key, got))
        finally:
            await proxy.stop()

    run(main())


def test_deliveries_lost_with_a_dying_connection_are_read_again(stack):
    """With no acks, what the server delivered into a connection that then
    died is gone from that consumer: here the proxy drops what the server
    sends while the task runs, until a trace was among it, then cuts. The
    readers create their consumers again from the last message read, so every
    trace and result arrives, each once."""
    async def main():
        host, port = stack["nats"].removeprefix("nats://").split(":")
        proxy = await TcpProxy(host, int(port)).start()
        try:
            async with await PolarClient.connect(nats=f"nats://127.0.0.1:{proxy.port}") as client:
                h = await client.submit(shell_task("py-lost", 2, turns=3, delay_ms=400))
                got, results = [], []

                async def read_traces():
                    async for m in h.traces():
                        got.append(m)

                async def read_results():
                    async for r in h.results():
                        results.append(r)

                readers = asyncio.gather(read_traces(), read_results())
                deadline = asyncio.get_running_loop().time() + 60
                while not got:
                    assert asyncio.get_running_loop().time() < deadline, "no trace arrived"
                    await asyncio.sleep(0.02)
                assert proxy.blackhole() == 1
                # A trace delivered to the reader's consumer goes into the blackhole.
                while b"$JS.ACK.POLAR_TRACES." not in proxy.dropped:
                    assert asyncio.get_running_loop().time() < deadline, "no trace was delivered into the blackhole"
                    await asyncio.sleep(0.02)
                assert proxy.cut() > 0
                await asyncio.wait_for(readers, 60)
                assert len(got) == 6 and len({key(m) for m in got}) == 6
                assert sorted(m["seq"] for m in got) == [m["seq"] for m in got]
                assert sorted(r["session_id"] for r in results) == sorted({m["session_id"] for m in got})
                assert all(r["status"] == "COMPLETED" for r in results)
                for m in got:
                    r = next(r for r in results if r["session_id"] == m["session_id"])
                    assert m["trace"]["response_ids"] == r["trajectory"]["traces"][m["trace_index"]]["response_ids"]
        finally:
            await proxy.stop()

    run(main())


def test_close_right_after_the_connection_dropped(stack):
    """close() just after the server went away (or the connection was cut, the
    client reconnecting) closes at once instead of draining through the dead
    socket (nats-py's drain then waits out its 10 s flush timeout); a call on
    the closed client is a typed error."""
    async def main():
        host, port = stack["nats"].removeprefix("nats://").split(":")
        for drop in ("server gone", "cut"):
            proxy = await TcpProxy(host, int(port)).start()
            try:
                client = await PolarClient.connect(nats=f"nats://127.0.0.1:{proxy.port}")
                with pytest.raises(PolarError) as e:
                    await client.task("py-close-unknown")
                assert e.value.code == "not_found"
                if drop == "server gone":
                    await proxy.stop()
                else:
                    assert proxy.cut() > 0
                # A deadline well under the 10 s a drain would wait.
                await asyncio.wait_for(client.close(), 8)
                with pytest.raises(PolarError) as e:
                    await client.task("py-close-unknown")
                assert (e.value.code, e.value.retryable) == ("unavailable", True)
            finally:
                await proxy.stop()

    run(main())


def test_slime_samples(stack):
    async def main():
        # Sample 0 completes; sample 1's agent exits non-zero after its model calls: ERROR, masks zeroed by polar.
        task = shell_task("py-slime", 2, command_suffix=" && test $POLAR_SAMPLE_INDEX -lt 1")
        async with await PolarClient.connect(nats=stack["nats"]) as client:
            g = await (await client.submit(task)).group()
        assert [s.status for s in g.sessions] == ["COMPLETED", "ERROR"]
        samples = to_slime_samples(g, group_index=7)
        assert len(samples) == 4
        for i, (sample, (s, m)) in enumerate(zip(samples, [(s, m) for s in g.sessions for m in s.traces])):
            t = m["trace"]
            assert tuple(sample) == SLIME_SAMPLE_FIELDS
            assert (sample["group_index"], sample["index"], sample["session_id"]) == (7, i, s.session_id)
            assert sample["tokens"] == t["prompt_ids"] + t["response_ids"]
            assert sample["response_length"] == len(t["response_ids"]) > 0
            assert sample["loss_mask"] == t["loss_mask"]
            assert sample["rollout_log_probs"] == t["response_logprobs"]
            assert sample["prompt"] == t["prompt_messages"]
            assert sample["metadata"]["polar"]["advantage"] == s.advantage
            assert sample["weight_versions"] == sorted({str(t["metadata"]["policy_version_min"]), str(t["metadata"]["policy_version_max"])})
        ok, failed = samples[:2], samples[2:]
        assert [x["status"] for x in ok] == ["completed", "completed"]
        assert all(x["loss_mask"] == [1] * x["response_length"] and x["reward"] == 1 for x in ok)
        assert [x["status"] for x in failed] == ["aborted", "aborted"]
        assert all(x["loss_mask"] == [0] * x["response_length"] and x["reward"] == 0 for x in failed)

    run(main())


def test_grpo_advantages():
    assert grpo_advantages([]) == []
    assert grpo_advantages([0.5]) == [0]
    assert grpo_advantages([1, 0], normalize_std=False) == [0.5, -0.5]
    a = grpo_advantages([1, 1, 0, 0])
    assert a[0] == pytest.approx(1, abs=1e-5) and sum(a) == pytest.approx(0, abs=1e-9)
