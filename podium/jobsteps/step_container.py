"""An srun step's container: Pyxis' options on srun, made by podium.run.containers.lifecycle as
the job's user (srun runs as the user), in the user's container cache.

Imported only when a step asks for a container (srun's fast path stays small).
"""

from __future__ import annotations

import os
from typing import Any

from podium.run.containers.lifecycle import IMPORT_ENV, ContainerError, prepare, remove
from podium.run.containers.nvidia import driver_files
from podium.run.identity import Identity


def step_container(
    options: dict[str, object], env: dict[str, str], cwd: str | None, gpus: list[int], run: str
) -> dict[str, Any]:
    """The runtime description of the step's container (for the tasks' `enter`), made
    in the user's container cache under the name `run` (its "state" is removed when
    the step is over); raises ValueError with what is wrong."""
    image = options.get("image")
    if not isinstance(image, str):
        raise ValueError("--container-* options need --container-image here")
    home = env.get("PODIUM_HOME")
    if not home:
        raise ValueError("--container-image: this job's environment has no PODIUM_HOME")
    request = dict(options)
    request.update(
        work_dir=cwd or os.getcwd(),
        cache_dir=f"{home}/containers",
        home=env.get("HOME"),
        writable=options.get("writable", True),
        gpus=[
            {"index": g, "uuid": "", "device": f"/dev/nvidia{g}"}
            for g in gpus
            if os.path.exists(f"/dev/nvidia{g}")
        ],
        driver_files=driver_files() if gpus else [],  # this host's driver, for its GPUs
        import_env={k: v for k, v in env.items() if k in IMPORT_ENV},
    )
    who = Identity(os.getuid(), os.getgid(), tuple(os.getgroups()))
    try:
        return prepare(request, run, who)
    except ContainerError as exc:
        raise ValueError(str(exc)) from None


__all__ = ["remove", "step_container"]
