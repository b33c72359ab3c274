#!/usr/bin/env python3
"""GRPO on polar, end to end, with a policy that actually learns.

Each step submits a batch of tasks (several arithmetic instructions x 8
samples) run by a small tool-calling agent (shell harness) through polar's
capturing proxy against the sim's learnable policy, receives each task's
GRPO group through the Python client, and takes a PPO-clipped
policy-gradient step on the policy's logits (numpy). The old log-probability
of each sampled step is the sum of its trace's captured mask-1
``response_logprobs``; at the first epoch of every step the ratio new/old
must be 1 within 1e-4 (asserted), which proves the captured logprobs are the
behaviour policy's. Then: pause inference, push the weights to the sim
(``POST /admin/weights``), resume with policy version + 1.

    python examples/grpo-loop/grpo_loop.py [--steps 30] [--out examples/grpo-loop/reward.png]

starts ``polar up --policy learnable`` itself unless ``--nats``, ``--sim`` are given.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polar_client import PolarClient

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PLAYBOOK = HERE / "playbook.json"
# (rule, a, b, expected answer)
INSTRUCTIONS = [("sum", 3, 4, 7), ("product", 5, 6, 30), ("difference", 9, 4, 5), ("sum", 12, 30, 42)]
RATIO_TOL = 1e-4


@dataclass
class Sample:
    key: str
    action: int
    old_logprob: float
    advantage: float


@dataclass
class History:
    rewards: list[float] = field(default_factory=list)
    ratio_errors: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


class ActionSpace:
    """Maps an agent's tool call back to (choice point, alternative): the trainer's 'detokenizer'."""

    def __init__(self, playbook: dict):
        self.rules = []
        for i, rule in enumerate(playbook["rules"]):
            regex = re.compile(rule["match"].replace("(?<", "(?P<"), re.I)
            points = [(s, step["choose"]) for s, step in enumerate(rule["steps"]) if "choose" in step]
            self.rules.append((rule.get("name", str(i)), regex, points))

    def classify(self, instruction: str, command: str) -> tuple[str, int] | None:
        for name, regex, points in self.rules:
            m = regex.search(instruction)
            if not m:
                continue
            for s, alts in points:
                for k, alt in enumerate(alts):
                    if "run" in alt and re.sub(r"\$<(\w+)>", lambda g: m.group(g.group(1)), alt["run"]) == command:
                        return f"{name}/{s}", k
        return None


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def http_json(method: str, url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as res:
        return json.load(res)


def task_for(run_id: str, step: int, i: int, rule: str, a: int, b: int, expected: int, samples: int) -> dict:
    return {
        "task_id": f"grpo-{run_id}-s{step}-t{i}",
        "instruction": f"Write the {rule} of {a} and {b} into `answer.txt`.",
        "num_samples": samples,
        "timeout_seconds": 120,
        "max_policy_lag": 0,
        "runtime": {"backend": "local", "prepare": [{"type": "upload_file", "source": "config/examples/tool-agent.py", "target": "tool-agent.py"}]},
        "agent": {"harness": "shell", "custom_shell": {"command": "python3 tool-agent.py", "env": {"MAX_TURNS": "3"}}},
        "builder": {"strategy": "per_request"},
        "evaluator": {"strategy": "command", "config": {"command": f'test "$(cat answer.txt)" = {expected}'}},
    }


def samples_of(group, instruction: str, space: ActionSpace) -> list[Sample]:
    out = []
    for s in group.sessions:
        if s.status != "COMPLETED":
            continue
        for m in s.traces:
            t = m["trace"]
            calls = [c for msg in t.get("response_messages", []) for c in (msg.get("tool_calls") or [])]
            mask, lps = t.get("loss_mask") or [], t.get("response_logprobs")
            if not calls or not lps or 1 not in mask:
                continue  # the final answer (deterministic) or a masked (stale) trace: nothing to learn
            command = json.loads(calls[0]["function"]["arguments"]).get("command", "")
            hit = space.classify(instruction, command)
            if hit is None:
                raise RuntimeError(f"unknown action {command!r} for {instruction!r}")
            old = float(sum(lp for lp, k in zip(lps, mask) if k == 1))
            out.append(Sample(hit[0], hit[1], old, s.advantage))
    return out


def ppo_step(theta: dict[str, np.ndarray], batch: list[Sample], lr: float, epochs: int, clip: float) -> float:
    """Clipped policy-gradient ascent on the logits; returns the largest |ratio - 1| at the first epoch."""
    first_epoch_error = 0.0
    for epoch in range(epochs):
        grads = {k: np.zeros_like(v) for k, v in theta.items()}
        for smp in batch:
            lp = log_softmax(theta[smp.key])
            ratio = float(np.exp(lp[smp.action] - smp.old_logprob))
            if epoch == 0:
                first_epoch_error = max(first_epoch_error, abs(ratio - 1.0))
                assert abs(ratio - 1.0) < RATIO_TOL, f"ratio {ratio} at epoch 0: captured logprobs are not the behaviour policy's"
            unclipped = ratio * smp.advantage
            clipped = float(np.clip(ratio, 1 - clip, 1 + clip)) * smp.advantage
            if unclipped <= clipped:  # the min is the unclipped term: it carries the gradient
                onehot = np.zeros_like(lp)
                onehot[smp.action] = 1.0
                grads[smp.key] += unclipped * (onehot - np.exp(lp))
        for k in theta:
            theta[k] = theta[k] + lr * grads[k] / max(1, len(batch))
    return first_epoch_error


async def train(nats: str, sim: str, steps: int, samples: int = 8, lr: float = 2.0, epochs: int = 4, clip: float = 0.3, log=print) -> History:
    space = ActionSpace(json.loads(PLAYBOOK.read_text()))
    state = http_json("GET", f"{sim}/admin/weights")
    theta = {p["key"]: np.array(p["logits"], dtype=np.float64) for p in state["points"]}
    client = await PolarClient.connect(nats=nats)
    history = History()
    run_id = f"{int(time.time() * 1000) % 10**9:x}"
    try:
        version = int((await client.resume(0))["policy_version"])  # the cluster's current version (resume is idempotent)
        for step in range(steps):
            t0 = time.time()
            handles = [await client.submit(task_for(run_id, step, i, *ins, samples)) for i, ins in enumerate(INSTRUCTIONS)]
            groups = await asyncio.gather(*(h.group() for h in handles))
            batch: list[Sample] = []
            rewards: list[float] = []
            for (rule, a, b, _), g in zip(INSTRUCTIONS, groups):
                rewards += [s.reward for s in g.sessions]
                batch += samples_of(g, f"Write the {rule} of {a} and {b} into `answer.txt`.", space)
            err = ppo_step(theta, batch, lr, epochs, clip)
            # Weight sync: hold the agents' calls, swap the weights, release them under the new version.
            await client.pause(timeout_s=30)
            http_json("POST", f"{sim}/admin/weights", {"weights": {k: v.tolist() for k, v in theta.items()}, "version": str(version + 1)})
            version = int((await client.resume(version + 1))["policy_version"])
            history.rewards.append(float(np.mean(rewards)))
            history.ratio_errors.append(err)
            history.versions.append(version)
            history.seconds.append(time.time() - t0)
            log(f"step {step + 1:2d}  reward {history.rewards[-1]:.3f}  samples {len(batch):3d}  max|ratio-1| {err:.1e}  version {version}  {history.seconds[-1]:.1f}s")
    finally:
        await client.close()
    return history


def plot(history: History, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    xs = range(1, len(history.rewards) + 1)
    ax.plot(xs, history.rewards, marker="o", ms=3)
    ax.axhline(0.9, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward (32 sessions)")
    ax.set_ylim(0, 1.02)
    ax.set_title("polar: GRPO on the sim's learnable policy")
    fig.tight_layout()
    fig.savefig(out)


class Stack:
    """`polar up --policy learnable` as a child process."""

    def __init__(self, max_run: int = 16):
        cmd = ["node", str(ROOT / "bin" / "polar.js"), "up", "--http-port", "0", "--log-level", "warn", "--policy", "learnable",
               "--playbook", str(PLAYBOOK), "--max-run", str(max_run)]
        self.state = Path(tempfile.mkdtemp(prefix="polar-grpo-")) / "up.json"
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "POLAR_STATE_FILE": str(self.state)})
        self.urls: dict[str, str] = {}
        lines = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.match(r"\s+(NATS|sim)\s+(\S+)", line)
            if m:
                self.urls[m.group(1).lower()] = m.group(2)
            if line.startswith("ready"):
                break
        if set(self.urls) != {"nats", "sim"}:
            self.stop()
            raise RuntimeError("polar up did not start:\n" + "".join(lines))
        # The trainer's NATS credentials (polar up writes them to its state file); the client reads POLAR_NATS_*.
        trainer = (json.loads(self.state.read_text()).get("nats_credentials") or {}).get("trainer") or {} if self.state.exists() else {}
        for k, env in (("user", "POLAR_NATS_USER"), ("password", "POLAR_NATS_PASSWORD"), ("token", "POLAR_NATS_TOKEN")):
            if trainer.get(k):
                os.environ[env] = trainer[k]
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=HERE / "reward.png")
    ap.add_argument("--nats", help="use a running polar (with --sim) instead of starting one")
    ap.add_argument("--sim", help="the learnable sim's URL (with --nats)")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the `polar up` child is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stack = None if args.nats else Stack()
    nats, sim = (args.nats, args.sim) if args.nats else (stack.urls["nats"], stack.urls["sim"])
    t0 = time.time()
    try:
        history = asyncio.run(train(nats, sim, args.steps))
    finally:
        if stack:
            stack.stop()
    plot(history, args.out)
    print(f"reward {history.rewards[0]:.3f} -> {history.rewards[-1]:.3f} (best {max(history.rewards):.3f}) in {len(history.rewards)} steps, "
          f"{time.time() - t0:.0f} s; every first-epoch ratio within {RATIO_TOL:g} of 1; curve: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
