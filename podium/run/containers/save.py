"""--container-save: a container's final state as a squashfs file, as Pyxis saves it
(`enroot export`) when the job or step is over.

The saved tree is the image with the writable layer of the first task (or the named
container's layer) over it: both are stacked as the lower layers of a read-only
overlay, so the layer's whiteouts and opaque directories mean what they meant while
the task ran. It is mounted and squashed by a child that has taken the user's whole
identity, in a user and mount namespace of its own (nothing is mounted on the host),
with enroot's mksquashfs options (`-all-root`, $PODIUM_SQUASH_OPTIONS or
`-comp lzo -noD`); the file appears whole at its path, or not at all.

Standard library only.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from typing import Any

from podium.run.containers.mounts import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    PR_SET_DUMPABLE,
    ContainerError,
    child_report,
    libc_call,
    mount,
    unshare,
    write_proc,
)
from podium.run.identity import Identity

SQUASH_DEFAULTS = "-comp lzo -noD"  # enroot's ENROOT_SQUASH_OPTIONS


def lower_dirs(c: dict[str, Any]) -> list[str]:
    """The directories of container `c` (from podium.run.containers.lifecycle.prepare), topmost
    first, whose stack is its state after its first task: that task's writable layer
    (or the named container's) when it has one, then the image."""
    layers = c.get("layers")
    dirs = []
    if layers is not None:
        upper = os.path.join(layers, "" if c.get("named") else "task-0", "upper")
        if os.path.isdir(upper):
            dirs.append(upper)
    return [*dirs, str(c["rootfs"])]


def save(c: dict[str, Any], output: str, who: Identity, options: str | None = None) -> None:
    """Save container `c` to the squashfs file `output` (replaced whole) as user `who`.
    Raises ContainerError with one line saying why it could not."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        _child(c, output, who, options or SQUASH_DEFAULTS, write_end)
    os.close(write_end)
    message = child_report(pid, read_end)
    if message != "ok":
        raise ContainerError(f"--container-save={output}: {message or 'the save failed'}")


def _child(c: dict[str, Any], output: str, who: Identity, options: str, out: int) -> None:
    """Become the user, stack the container read-only, mksquashfs it; report "ok" or
    the reason on `out`. Never returns."""
    message = "the save failed"
    try:
        os.closerange(3, out)
        os.closerange(out + 1, 65536)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if os.geteuid() == 0 and who.uid != 0:
            os.setgroups(list(who.groups))
            os.setgid(who.gid)
            os.setuid(who.uid)
        os.umask(who.umask)
        uid, gid = os.getuid(), os.getgid()
        libc_call("prctl", PR_SET_DUMPABLE, 1, 0, 0, 0)
        unshare(CLONE_NEWUSER | CLONE_NEWNS)
        write_proc("/proc/self/setgroups", "deny")
        write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
        write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        target = str(c["target"])
        lowers = lower_dirs(c)
        if len(lowers) > 1:
            mount("overlay", target, "overlay", MS_RDONLY, f"lowerdir={':'.join(lowers)},userxattr")
        else:
            target = lowers[0]
        partial = f"{output}.partial-{os.getpid()}"
        argv = ["mksquashfs", target, partial, "-all-root", "-noappend", "-no-progress", "-quiet"]
        done = subprocess.run(
            [*argv, *shlex.split(options)], capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            os.replace(partial, output)
            message = "ok"
        else:
            lines = (done.stderr or done.stdout).strip().splitlines()
            message = f"mksquashfs: {lines[-1] if lines else done.returncode}"
            if os.path.exists(partial):
                os.unlink(partial)
    except ContainerError as exc:
        message = str(exc)
    except OSError as exc:
        message = f"{exc.strerror}: {exc.filename or output}"
    except BaseException as exc:  # the child must report and exit, whatever happened
        message = f"the save failed: {exc}"
    try:
        os.write(out, message.encode()[:65536])
    finally:
        os._exit(0)


__all__ = ["SQUASH_DEFAULTS", "lower_dirs", "save"]
