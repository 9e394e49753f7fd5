"""Slurm's command-line tools and slurmrestd, as the Slurm backend calls them.

Every call is an argv list (never a shell string). A tool's error becomes one
SlurmError line with Slurm's own message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from podium.config.cluster import SlurmAccess
from podium.errors import PodiumError


class SlurmError(PodiumError):
    """Slurm refused a request or could not be reached; the message is Slurm's."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if "error" in line.lower() or "fatal" in line.lower():
            return re.sub(r"^\w+: (error|fatal): ", "", line)
    return lines[-1] if lines else "no output"


class SlurmTools:
    """Runs sbatch, squeue, sinfo, scontrol, scancel and sacct against one cluster."""

    def __init__(self, access: SlurmAccess) -> None:
        self.access = access

    def _tool(self, name: str) -> str:
        return str(Path(self.access.bin_dir) / name) if self.access.bin_dir else name

    def run(
        self,
        argv: list[str],
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
        cwd: str | None = None,
    ) -> str:
        """Run one tool; return its stdout or raise SlurmError with its first error line."""
        full_env = dict(env if env is not None else os.environ)
        if self.access.conf:
            full_env["SLURM_CONF"] = self.access.conf
        full_env.pop("SLURM_JWT", None)  # with it set, srun and scontrol switch to JWT auth
        try:
            done = subprocess.run(
                [self._tool(argv[0]), *argv[1:]],
                input=stdin,
                capture_output=True,
                text=True,
                env=full_env,
                timeout=timeout,
                cwd=cwd,
            )
        except FileNotFoundError:
            raise SlurmError(
                f"{argv[0]} not found: install Slurm's client tools or set slurm.bin_dir"
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer within {timeout:.0f} s") from None
        if done.returncode != 0:
            raise SlurmError(f"{argv[0]}: {_first_error(done.stderr or done.stdout)}", 2)
        return done.stdout

    def json(self, argv: list[str]) -> dict[str, Any]:
        out = self.run(argv)
        try:
            data: dict[str, Any] = json.loads(out)
        except ValueError:
            raise SlurmError(f"{argv[0]} --json printed something that is not JSON") from None
        return data

    def jobs(self) -> list[dict[str, Any]]:
        """All jobs slurmctld knows (pending, running, and recently ended)."""
        jobs: list[dict[str, Any]] = self.json(["squeue", "--json"]).get("jobs") or []
        return jobs

    def nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = self.json(["sinfo", "--json"]).get("nodes") or []
        return nodes

    def show_job(self, job_id: int) -> dict[str, str]:
        """`scontrol show job -o ID` as a dict (22.05's JSON lacks StdOut/StdErr)."""
        try:
            out = self.run(["scontrol", "show", "job", "-o", str(job_id)])
        except SlurmError:
            return {}
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def config_value(self, key: str) -> str | None:
        out = self.run(["scontrol", "show", "config"])
        match = re.search(rf"^{re.escape(key)}\s*=\s*(.*)$", out, re.M)
        return match.group(1).strip() if match else None


class SlurmRest:
    """slurmrestd for reads: the same documents as `squeue --json` / `sinfo --json`."""

    def __init__(self, access: SlurmAccess) -> None:
        import httpx  # only the REST path pays for it

        assert access.rest_url
        self.version = access.api_version
        headers = {}
        token = os.environ.get(access.rest_token_env)
        if token:
            headers["X-SLURM-USER-TOKEN"] = token
            headers["X-SLURM-USER-NAME"] = access.rest_user or _user()
        if access.rest_url.startswith("unix:"):
            transport = httpx.HTTPTransport(uds=access.rest_url[len("unix:") :])
            self.http = httpx.Client(
                transport=transport, base_url="http://localhost", headers=headers, timeout=30
            )
        else:
            self.http = httpx.Client(base_url=access.rest_url, headers=headers, timeout=30)

    def _get(self, what: str) -> dict[str, Any]:
        import httpx

        try:
            response = self.http.get(f"/slurm/{self.version}/{what}")
        except httpx.HTTPError as exc:
            raise SlurmError(f"slurmrestd: {exc}") from None
        try:
            data: dict[str, Any] = response.json()
        except ValueError:
            raise SlurmError(f"slurmrestd answered {response.status_code} with non-JSON") from None
        errors = [e for e in data.get("errors") or [] if e.get("error_number") or e.get("error")]
        if response.status_code >= 400 or errors:
            detail = errors[0].get("error") or errors[0].get("description") if errors else ""
            raise SlurmError(f"slurmrestd: HTTP {response.status_code} {detail}".strip())
        return data

    def jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self._get("jobs").get("jobs") or []
        return jobs

    def nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = self._get("nodes").get("nodes") or []
        return nodes


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
