"""polar's trainer client: submit rollout tasks, stream their results and
traces (NATS, or HTTP with the standard library only), GRPO groups and
advantages, slime samples."""
from .client import PolarClient, TaskHandle
from .errors import ERROR_CODES, PolarError
from .grpo import Group, GroupSession, build_group, grpo_advantages
from .slime import SLIME_SAMPLE_FIELDS, SLIME_STATUSES, slime_status, to_slime_samples

__all__ = [
    "PolarClient", "TaskHandle", "PolarError", "ERROR_CODES", "Group", "GroupSession", "build_group",
    "grpo_advantages", "to_slime_samples", "slime_status", "SLIME_SAMPLE_FIELDS", "SLIME_STATUSES",
]
