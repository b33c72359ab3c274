"""A short GRPO run on the real stack (`polar up --policy learnable`): reward
rises and the correct alternatives gain probability, every first-epoch PPO ratio is 1 within 1e-4 (the captured logprobs
are the behaviour policy's), and every step bumps the policy version that
the sim and polar agree on."""
import asyncio
import json
import urllib.request

import pytest

import grpo_loop


@pytest.fixture(scope="module")
def learnable_stack():
    stack = grpo_loop.Stack(max_run=16)
    yield stack.urls
    stack.stop()


def test_short_grpo_run_learns(learnable_stack):
    steps = 5
    history = asyncio.run(grpo_loop.train(learnable_stack["nats"], learnable_stack["sim"], steps, lr=4.0, clip=0.3))
    assert len(history.rewards) == steps
    assert all(e < grpo_loop.RATIO_TOL for e in history.ratio_errors)
    assert history.versions == [1, 2, 3, 4, 5]
    # From 0.25 in expectation; each step's reward is sampled before its update.
    assert sum(history.rewards[-2:]) / 2 > history.rewards[0]
    with urllib.request.urlopen(f"{learnable_stack['sim']}/admin/weights") as res:
        sim = json.load(res)
    assert sim["policy_version"] == "5"
    # The correct alternative of every choice point gained probability.
    correct = {"sum/0": 0, "product/0": 1, "difference/0": 2}
    for p in sim["points"]:
        assert p["log_probs"][correct[p["key"]]] > -1.204  # ln 0.3, from ln 0.25
