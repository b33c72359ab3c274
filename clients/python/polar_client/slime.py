"""polar traces as slime ``Sample`` dicts (THUDM/slime, slime/utils/types.py).

``Sample.from_dict(d)`` accepts each dict as it is, so a slime custom rollout
function can return them. One sample per trace; tokens are prompt + response
ids, and ``loss_mask`` and ``rollout_log_probs`` are exactly what polar
captured (a masked-out session keeps its zeroed mask).
"""
from __future__ import annotations

from typing import Any

from .grpo import Group

#: The fields of slime's ``Sample`` dataclass, in its order (``to_dict`` form).
SLIME_SAMPLE_FIELDS = (
    "group_index", "index", "prompt", "raw_prompt", "tokens", "multimodal_inputs", "multimodal_train_inputs",
    "response", "response_length", "label", "reward", "loss_mask", "weight_versions", "rollout_log_probs",
    "rollout_routed_experts", "remove_sample", "teacher_log_probs", "status", "metadata", "generate_function_path",
    "train_metadata", "session_id", "non_generation_time", "spec_info", "prefix_cache_info",
)

#: slime's ``Sample.Status`` values.
SLIME_STATUSES = ("pending", "completed", "truncated", "aborted", "failed")


def slime_status(session_status: str, finish_reason: str | None) -> str:
    """COMPLETED -> completed (truncated when the call hit its length limit);
    TIMEOUT -> truncated (the agent ran out of budget: a partial trajectory);
    ERROR -> aborted (cancelled or failed; polar zeroed its mask)."""
    if session_status == "COMPLETED":
        return "truncated" if finish_reason == "length" else "completed"
    if session_status == "TIMEOUT":
        return "truncated"
    if session_status == "ERROR":
        return "aborted"
    return "pending"


def weight_versions(meta: dict[str, Any]) -> list[str]:
    """The engine's own weight versions when it reported them, else polar's
    policy versions the trace's completions were sampled under (min and max)."""
    if meta.get("engine_weight_versions"):
        return [str(v) for v in meta["engine_weight_versions"]]
    versions = [meta[k] for k in ("policy_version_min", "policy_version_max") if isinstance(meta.get(k), int)]
    return [str(v) for v in sorted(set(versions))]


def _response_text(trace: dict[str, Any]) -> str:
    parts = []
    for m in trace.get("response_messages") or []:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "".join(parts)


def to_slime_samples(group: Group, group_index: int | None = 0, start_index: int = 0) -> list[dict[str, Any]]:
    """One slime ``Sample`` dict per trace of the group, sessions in sample order."""
    out: list[dict[str, Any]] = []
    for s in group.sessions:
        for m in s.traces:
            t = m["trace"]
            meta = dict(t.get("metadata") or {})
            reward = t.get("reward")
            out.append({
                "group_index": group_index,
                "index": start_index + len(out),
                "prompt": t.get("prompt_messages") or [],
                "raw_prompt": None,
                "tokens": list(t.get("prompt_ids") or []) + list(t.get("response_ids") or []),
                "multimodal_inputs": None,
                "multimodal_train_inputs": None,
                "response": _response_text(t),
                "response_length": len(t.get("response_ids") or []),
                "label": None,
                "reward": float(reward) if isinstance(reward, (int, float)) else s.reward,
                "loss_mask": list(t.get("loss_mask") or []),
                "weight_versions": weight_versions(meta),
                "rollout_log_probs": t.get("response_logprobs"),
                "rollout_routed_experts": None,
                "remove_sample": False,
                "teacher_log_probs": None,
                "status": slime_status(s.status, t.get("finish_reason")),
                "metadata": {
                    **meta,
                    "polar": {
                        "task_id": group.task_id, "session_id": s.session_id, "sample_index": s.sample_index,
                        "attempt": s.attempt, "trace_index": m["trace_index"], "trace_count": m["trace_count"],
                        "seq": m.get("seq"), "session_status": s.status, "advantage": s.advantage,
                        "finish_reason": t.get("finish_reason"),
                    },
                },
                "generate_function_path": None,
                "train_metadata": None,
                "session_id": s.session_id,
                "non_generation_time": 0.0,
                "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0, "completion_token_num": 0},
                "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0},
            })
    return out
