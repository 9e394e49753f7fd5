"""The contract every backend keeps (podium.api.backend_protocol.Backend checks it when
a backend class is defined): the features a backend may lack (`Feature`, the keys of
its CANNOT table), the hooks it must implement (REQUIRED_HOOKS), and those it
implements or declares impossible with a reason (FEATURE_HOOKS). Stdlib only: the
client's lean path loads it with the protocol.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    pass


class Feature:
    """What a backend may be unable to do (the names of `CANNOT` tables' keys; plain
    text, so that a submit need not load enum)."""

    PRIORITIES = "priorities"
    FAIR_SHARE = "fair share"
    TEAMS = "team quotas"
    CHECKPOINT_REPORT = "reporting a job's checkpoint"
    PROGRESS_REPORT = "reporting a job's progress"
    HEALTH = "health checks on request"
    FAULT_INJECTION = "fault injection"
    GPU_RESUME = "resuming one GPU"
    SHUTDOWN = "stopping the cluster's daemon"
    BATCH = "submitting several jobs at once, all or none"
    MIG_ADVICE = "MIG layout advice"
    MIG_APPLY = "re-splitting a GPU's MIG layout"
    FORECAST = "forecasting when pending jobs start"


# The hooks every backend implements (the base class's raise NotImplementedError).
REQUIRED_HOOKS = (
    "_ping", "_submit", "_dry_run", "_jobs", "_job", "_control", "_send_signal", "_acct",
    "_set_time_limit", "_set_nice", "_nodes", "_drain", "_resume",
)  # fmt: skip
# The hooks a backend implements or declares, with the reason, in its CANNOT table.
FEATURE_HOOKS = {
    Feature.BATCH: "_submit_batch",
    Feature.PRIORITIES: "_priorities",
    Feature.FAIR_SHARE: "_share",
    Feature.TEAMS: "_teams",
    Feature.FORECAST: "_forecast",
    Feature.CHECKPOINT_REPORT: "_checkpoint",
    Feature.PROGRESS_REPORT: "_progress",
    Feature.MIG_ADVICE: "_mig_advice",
    Feature.MIG_APPLY: "_mig_apply",
    Feature.HEALTH: "_health",
    Feature.FAULT_INJECTION: "_inject",
    Feature.SHUTDOWN: "_shutdown",
}
# Features that narrow a required hook rather than own one (resume: a GPU, not a node).
PARTIAL_FEATURES = (Feature.GPU_RESUME,)


class ContractError(TypeError):
    """A Backend subclass breaks the contract: raised when the class is defined (so at
    import, before any user meets it), naming the hook and what would be right."""


def contract_breaches(cls: type, base: type) -> list[str]:
    """What the concrete backend class `cls` (one with a `name`; a subclass of `base`,
    podium.api.backend_protocol.Backend, whose hooks only raise) lacks: each required
    hook not implemented, each feature hook neither implemented nor declared in
    CANNOT, each CANNOT entry that is no Feature or has no one-line reason, or a
    feature both implemented and declared impossible. Empty when it keeps the contract."""
    name = getattr(cls, "name", "")
    found: list[str] = []

    def mine(hook: str) -> bool:
        return getattr(cls, hook) is not getattr(base, hook)

    for hook in REQUIRED_HOOKS:
        if not mine(hook):
            found.append(f"backend {name!r} does not implement {hook}: every backend must")
    cannot = dict(getattr(cls, "CANNOT", {}))
    known = set(FEATURE_HOOKS) | set(PARTIAL_FEATURES)
    for feature, reason in cannot.items():
        if feature not in known:
            found.append(f"backend {name!r}: CANNOT names {feature!r}, which is no Feature")
        elif not isinstance(reason, str) or not reason.strip() or "\n" in reason:
            found.append(f"backend {name!r}: CANNOT[{feature!r}] needs a one-line reason")
    for feature, hook in FEATURE_HOOKS.items():
        if mine(hook) and feature in cannot:
            found.append(
                f"backend {name!r} implements {hook} and declares it cannot do {feature!r}: "
                "one or the other"
            )
        elif not mine(hook) and feature not in cannot:
            found.append(
                f"backend {name!r} does not implement {hook}: implement it, or declare "
                f"{feature!r} in CANNOT with the reason users should read"
            )
    return found


__all__ = [
    "FEATURE_HOOKS",
    "PARTIAL_FEATURES",
    "REQUIRED_HOOKS",
    "ContractError",
    "Feature",
    "contract_breaches",
]
