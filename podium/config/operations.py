"""Config sections for keeping the cluster healthy and reaching Slurm: health
thresholds and recovery, auto-resume, and Slurm access."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field, model_validator

from podium.config.common import Closed
from podium.errors import ConfigError


class GpuTypeThresholds(Closed):
    """Health thresholds for one GPU type."""

    max_temperature_c: int = Field(default=84, ge=0)
    max_retired_pages: int = Field(default=10, ge=0)
    nccl_busbw_gbps: float | None = Field(default=None, gt=0)
    nvlink_links: int | None = Field(
        default=None,
        ge=0,
        description="NVLinks each GPU must have active (default: the model's for SXM "
        "parts, 18 on H100/H200/B200, 12 on A100; else every link it has)",
    )


class HealthConfig(Closed):
    """What `podium health` checks and against which thresholds."""

    kernel_log: str | None = Field(default=None, description="file with kernel messages (Xid)")
    disk_paths: list[str] = Field(default_factory=list, description="default: / and PODIUM_HOME")
    max_disk_used_percent: float = Field(default=83.0, gt=0, le=100)
    required_mounts: list[str] = Field(default_factory=list)
    nic_ports: int | None = Field(
        default=None,
        ge=0,
        description="RDMA ports (InfiniBand, RoCE, EFA) that must be ACTIVE: fewer drains "
        "the node (unset: a port that is down is only a warning)",
    )
    nic_sysfs: str = Field(
        default="/sys/class/infiniband", description="where the RDMA ports are read"
    )
    nccl_output: str | None = Field(default=None, description="nccl-tests output to judge")
    nccl_nodes_busbw_gbps: float | None = Field(
        default=None,
        gt=0,
        description="expected all_reduce busbw across nodes (podium health --deep --nodes); "
        "none: the first healthy run's figure, kept in PODIUM_HOME/nccl-baseline.json",
    )
    nccl_min_fraction: float = Field(
        default=0.7, gt=0, le=1, description="a run below this fraction of it is slow"
    )
    nccl_bytes: str = Field(
        default="32M",
        pattern=r"^[1-9][0-9]*[KMG]?$",
        description="message size of those runs (nccl-tests' -b/-e: 8M, 1G)",
    )
    dcgm_level: int = Field(default=1, ge=1, le=4, description="podium health --deep")
    dcgm_level_after_failure: int = Field(default=2, ge=1, le=4)
    dcgm_level_idle: int = Field(default=3, ge=1, le=4, description="also before return")
    burn_in_seconds: float = Field(default=5.0, gt=0, description="PyTorch GPU burn-in length")
    recovery: Literal["automatic", "none"] = Field(
        default="automatic",
        description="automatic: fence, reset or reboot, re-check, return to service; "
        "none: only label faults (HyperPod's node recovery modes)",
    )
    interval_s: float = Field(default=30.0, gt=0, description="quick checks run this often")
    gpu_memory_sample_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="running jobs' GPU memory (NVML) is sampled this often for acct's "
        "high-water mark; at a job's end NVML's accounting adds what samples missed",
    )
    deep_interval_s: float = Field(
        default=3600.0, gt=0, description="deep checks run this often on an idle node"
    )
    reset_command: str | None = Field(
        default=None,
        description="resets one GPU; {gpu} is its index (e.g. nvidia-smi --gpu-reset -i {gpu})",
    )
    reboot_command: str | None = Field(
        default=None, description="reboots the node (run only once it has no jobs)"
    )
    mig_apply_command: str | None = Field(
        default=None,
        description="re-splits one drained GPU for podium mig apply, instead of "
        "nvidia-mig-parted or nvidia-smi; {gpu} is its index, {layout} its profiles joined "
        "by commas (empty: whole), {config} a mig-parted file for it",
    )
    action_timeout_s: float = Field(default=300.0, gt=0)
    retry_s: float = Field(default=300.0, gt=0, description="wait after a failed deep check")
    max_faults: int = Field(
        default=3, ge=1, description="faults within fault_window_s that mark for replacement"
    )
    fault_window_s: float = Field(default=86400.0, gt=0)

    def for_node(self, node: str) -> HealthConfig:
        """This config as node `node` reads it: `{node}` in `kernel_log` filled in (one
        config file for every node, each with its own kernel log)."""
        if not self.kernel_log or "{node}" not in self.kernel_log:
            return self
        return self.model_copy(update={"kernel_log": self.kernel_log.format(node=node)})

    def remedy_argv(self, remedy: Literal["reset", "reboot"], gpu: int | None) -> list[str]:
        """The argv of the reset or reboot command, `{gpu}` filled with the GPU index.

        Split like a shell would, but never run by one: nothing in it is expanded, and
        the only value put in is an integer. Raises ConfigError when none is configured.
        """
        template = self.reset_command if remedy == "reset" else self.reboot_command
        if not template:
            raise ConfigError(f"health.{remedy}_command is not configured")
        return shlex.split(template.replace("{gpu}", "" if gpu is None else str(int(gpu))))

    def mig_apply_argv(self, gpu: int, layout: list[str], config: str) -> list[str] | None:
        """The argv of `mig_apply_command` for GPU `gpu` (None when none is set), split
        like remedy_argv: the values put in are an integer, profile names checked
        against the GPU's model, and a path Podium chose."""
        if not self.mig_apply_command:
            return None
        argv = shlex.split(self.mig_apply_command)
        values = {"{gpu}": str(int(gpu)), "{layout}": ",".join(layout), "{config}": config}
        out = []
        for arg in argv:
            for key, value in values.items():
                arg = arg.replace(key, value)
            out.append(arg)
        return out

    thresholds: dict[str, GpuTypeThresholds] = Field(
        default_factory=lambda: {
            "h100": GpuTypeThresholds(nccl_busbw_gbps=460.0),
            "h200": GpuTypeThresholds(nccl_busbw_gbps=460.0),
            "a100": GpuTypeThresholds(nccl_busbw_gbps=228.0),
        }
    )


class ResumeConfig(Closed):
    """Cluster defaults for auto-resume (a job's own options win)."""

    auto_resume: int = Field(default=0, ge=0, description="restarts after a fault, by default")
    requeue_exit_codes: list[int] = Field(
        default_factory=list, description="exit codes that mean 'a fault: requeue me'"
    )
    no_requeue_exit_codes: list[int] = Field(
        default_factory=list, description="exit codes that mean 'do not requeue'"
    )
    max_restarts_without_progress: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _codes(self) -> ResumeConfig:
        codes = self.requeue_exit_codes + self.no_requeue_exit_codes
        if any(not 0 <= c <= 255 for c in codes):
            raise ValueError("exit codes are 0-255")
        if 0 in self.requeue_exit_codes:
            raise ValueError("requeue_exit_codes: exit code 0 means success, it cannot requeue")
        both = set(self.requeue_exit_codes) & set(self.no_requeue_exit_codes)
        if both:
            raise ValueError(f"exit code {min(both)} is in both requeue lists: pick one")
        return self


class SlurmAccess(Closed):
    """How Podium reaches a Slurm cluster (backend: slurm)."""

    via: Literal["cli", "rest"] = Field(
        default="cli",
        description="Slurm's CLI tools (sbatch, squeue --json, ...) or slurmrestd for reads",
    )
    conf: str | None = Field(default=None, description="SLURM_CONF for the CLI tools")
    bin_dir: str | None = Field(default=None, description="where sbatch etc. live; PATH if unset")
    rest_url: str | None = Field(
        default=None, description="slurmrestd: http://HOST:PORT or unix:/PATH (via: rest)"
    )
    rest_user: str | None = Field(default=None, description="X-SLURM-USER-NAME for JWT auth")
    rest_token_env: str = Field(
        default="SLURM_TESTBED_JWT", description="environment variable holding the JWT"
    )
    api_version: str = Field(default="v0.0.38", pattern=r"^v\d+\.\d+\.\d+$")
    python: str | None = Field(
        default=None,
        description="the Python with Podium installed on the compute nodes (default: this one)",
    )
    state_dir: str | None = Field(
        default=None,
        description="shared directory for checkpoints and health state (default: PODIUM_HOME)",
    )

    @model_validator(mode="after")
    def _rest_needs_url(self) -> SlurmAccess:
        if self.via == "rest" and not self.rest_url:
            raise ValueError(
                "slurm.via: rest needs slurm.rest_url (http://HOST:PORT or unix:/PATH)"
            )
        return self


class KubernetesAccess(Closed):
    """How Podium reaches a Kubernetes cluster with Kueue (backend: kubernetes)."""

    kubeconfig: str | None = Field(
        default=None,
        description="kubeconfig file; none: $KUBECONFIG, ~/.kube/config or the in-cluster "
        "service account",
    )
    namespace: str = Field(
        default="default",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="where jobs are created (a team's namespace)",
    )
    local_queue: str = Field(
        default="default",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="the Kueue LocalQueue of jobs that name no --partition",
    )
    image: str | None = Field(
        default=None, description="the container image of jobs that give no --container-image"
    )
    pod_annotations: dict[str, str] = Field(
        default_factory=dict, description="annotations put on every job's pods"
    )
    switch_label: str | None = Field(
        default=None,
        pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        description="the node label of the network's leaf switches (the lowest layer of "
        "the Topology `podium k8s apply topology` made): --switches=1 asks Kueue for one "
        "domain of it; none: --switches is refused",
    )
