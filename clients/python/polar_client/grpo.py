"""GRPO's group-relative advantages and the group a trainer consumes."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

EPS = 1e-6
FINAL_TASK_STATES = ("completed", "failed", "cancelled")


def grpo_advantages(rewards: Sequence[float], normalize_std: bool = True) -> list[float]:
    """(r - mean) / (std + 1e-6) over the group (population std); with
    ``normalize_std=False`` just r - mean. A group of one gets advantage 0."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    centred = [r - mean for r in rewards]
    if not normalize_std:
        return centred
    std = math.sqrt(sum(c * c for c in centred) / len(rewards))
    return [c / (std + EPS) for c in centred]


@dataclass
class GroupSession:
    session_id: str
    sample_index: int
    status: str
    attempt: int
    reward: float
    advantage: float
    traces: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Group:
    task_id: str
    status: str
    sessions: list[GroupSession]
    stale_traces: int = 0


def is_stale(message: dict[str, Any]) -> bool:
    trace = message.get("trace") or {}
    tf = trace.get("training_filter") or (trace.get("metadata") or {}).get("training_filter") or {}
    return tf.get("reason") == "stale_policy"


def session_reward(traces: Sequence[dict[str, Any]]) -> float:
    """Mean trace reward; 0 for a session without rewarded traces (a failed one)."""
    rs = [m["trace"].get("reward") for m in traces]
    rs = [r for r in rs if isinstance(r, (int, float))]
    return sum(rs) / len(rs) if rs else 0.0


def build_group(task_id: str, status: str, sessions: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]], normalize_std: bool = True) -> Group:
    by_session: dict[str, list[dict[str, Any]]] = {}
    for m in traces:
        by_session.setdefault(m["session_id"], []).append(m)
    out = []
    for s in sorted(sessions, key=lambda s: s["sample_index"]):
        ts = sorted(by_session.get(s["session_id"], []), key=lambda m: m["trace_index"])
        out.append(GroupSession(s["session_id"], s["sample_index"], s["status"], s.get("attempt", 1), session_reward(ts), 0.0, ts))
    for s, a in zip(out, grpo_advantages([s.reward for s in out], normalize_std)):
        s.advantage = a
    return Group(task_id, status, out, sum(1 for m in traces if is_stale(m)))
