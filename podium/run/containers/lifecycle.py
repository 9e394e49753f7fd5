"""Running a task in a container the way enroot does for Pyxis: no daemon, no root.

Two halves:
- `prepare()`, in a child of the supervisor before any task starts (killed with all it
  started if the job is stopped meanwhile: podium.run.stopping), or in srun for a step:
  resolves the image to a root tree (a directory image is used as it is; a squashfs
  file is unpacked once, as the user, into the user's image cache, as `enroot create`
  does) and makes the directories the container is assembled in, owned by the user.
- `enter()`, in each task's child after it took the user's identity and before exec:
  a user namespace and a mount namespace of its own (the user keeps its uid, or is
  root inside with remap_root; it gains nothing outside); the image as an overlay
  (writable layer per task, or per named container) or a read-only bind; /proc and
  /sys bound from the host, a small /dev (the usual nodes, the job's GPUs and the
  NVIDIA control nodes), a tmpfs /tmp, the asked bind mounts; then chroot and chdir.

Everything mounted lives in the task's own mount namespace, so the kernel removes it
when the task's last process exits, whatever ended it (cancel, timeout, a killed
supervisor): nothing is left mounted on the host. The task is still the supervisor's
child, so exit codes, signals, limits and cgroups are those of a bare task.

Standard library only (the supervisor and srun import it when a job asks for a
container).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path
from typing import Any

from podium.api.containers import is_image_path, parse_mounts
from podium.run.containers.gpus import give_gpus
from podium.run.containers.mounts import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    MS_SLAVE,
    PR_SET_DUMPABLE,
    ContainerError,
    child_report,
    libc_call,
    mount,
    point,
    remount_readonly,
    unshare,
    write_proc,
)
from podium.run.identity import Identity

DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1"}
DEV_LINKS |= {"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
PROPAGATION = {"private": MS_PRIVATE, "rprivate": MS_PRIVATE | MS_REC}
PROPAGATION |= {"slave": MS_SLAVE, "rslave": MS_SLAVE | MS_REC}


# -- the supervisor's half ------------------------------------------------------


def prepare(request: dict[str, Any], run: str, who: Identity) -> dict[str, Any]:
    """The container of a job (or step), ready for `enter()`: raises ContainerError.

    `request` is the launch plan's `container` (image, work_dir, cache_dir, name,
    mounts, workdir, writable, remap_root, mount_home, home, entrypoint, gpus
    [{index, uuid, device}], driver_files, env_names); `who` is the job's user. The
    container's mount point and writable layers go in `state` (returned), the
    directory `run` of the user's cache: on the state disk, as enroot keeps
    containers in its data path, never in the job's runtime directory (a tmpfs: what
    the job writes would fill memory). Only the user's cache, whose parent is the
    daemon's, is made as this process; everything in it, and every look at the image,
    is done as the user. `remove(state)`, as the user, when the job or step is over.
    """
    image = str(request["image"])
    user_cache = Path(request["cache_dir"]) / str(who.uid)
    _own_dir(user_cache, (who.uid, who.gid), 0o700)
    if is_image_path(image):
        path = os.path.normpath(os.path.join(str(request["work_dir"]), image))
    else:
        path = pulled(image, request, who, user_cache / "image-cache")
    state = user_cache / "run" / run
    with who.entered():
        _own_dir(user_cache / "run", None, 0o700)
        _own_dir(state, None, 0o700)
        _own_dir(state / "root", None, 0o755)
        is_dir = os.path.isdir(path)
        layers = None
        if request.get("writable", True):
            name = request.get("name")
            if name:
                _own_dir(user_cache / "named", None, 0o700)
            layers = str(user_cache / "named" / name) if name else str(state)
            _own_dir(Path(layers), None, 0o700)
    rootfs = path if is_dir else _unpacked(path, user_cache / "images", who)
    return {
        "rootfs": rootfs,
        "state": str(state),
        "target": str(state / "root"),
        "layers": layers,
        "named": bool(request.get("name")),
        "mounts": [list(m) for m in parse_mounts(request.get("mounts") or [])],
        "workdir": request.get("workdir") or "/",
        "remap_root": bool(request.get("remap_root")),
        "home": request.get("home") if request.get("mount_home") else None,
        "gpus": list(request.get("gpus") or []),
        "driver_files": list(request.get("driver_files") or []),
        "env_names": list(request.get("env_names") or []),
        "entrypoint": bool(request.get("entrypoint")),
        "save": _save_path(request),
    }


# What a job's environment may set of an image pull at its start (podium.run.containers.images).
IMPORT_ENV = frozenset({
    "PODIUM_ALLOW_HTTP", "PODIUM_CREDENTIALS", "PODIUM_IMAGE_CACHE", "PODIUM_IMAGE_CACHE_MAX",
    "PODIUM_SQUASH_OPTIONS", "PODIUM_CONNECT_TIMEOUT", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    "ENROOT_CONFIG_PATH",
})  # fmt: skip


def pulled(image: str, request: dict[str, Any], who: Identity, fallback: Path) -> str:
    """The squashfs of image reference `image` in the user's image cache, imported
    first when it is not there (podium.run.containers.images.importer.ensure), as Pyxis pulls a
    reference at job start. The pull runs in a child that has taken the user's whole
    identity (uid, gid, groups) and keeps nothing of this process's privileges or
    descriptors, so what it reads from the network is handled as the user alone. A
    user without a home directory keeps the cache in `fallback` (its container
    directory). Raises ContainerError with the pull's reason. (The supervisor runs
    `prepare` in a child of its own, which it kills when the job is stopped meanwhile.)"""
    home = request.get("home")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home or "/"}
    env.update({k: str(v) for k, v in (request.get("import_env") or {}).items() if k in IMPORT_ENV})
    if not (home and os.path.isdir(home)) and "PODIUM_IMAGE_CACHE" not in env:
        env["PODIUM_IMAGE_CACHE"] = str(fallback)
    from podium.run.containers.images.importer import preload

    preload()  # the child may be a user who cannot read this interpreter's files
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        _pull_child(image, env, who, write_end)
    os.close(write_end)
    kind, _, text = child_report(pid, read_end).partition("\0")
    if kind != "ok" or not text:
        raise ContainerError(f"--container-image={image}: {text or 'the pull failed'}")
    return text


def _pull_child(image: str, env: dict[str, str], who: Identity, out: int) -> None:
    """The pulling child: become the user entirely, pull, report "ok\\0PATH" or
    "err\\0WHY" on `out`. Never returns."""
    code = 1
    try:
        os.closerange(3, out)
        os.closerange(out + 1, 65536)
        if os.geteuid() == 0 and who.uid != 0:
            os.setgroups(list(who.groups))
            os.setgid(who.gid)
            os.setuid(who.uid)
        os.umask(0o077)
        os.environ.clear()
        os.environ.update(env)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        from podium.run.containers.images.importer import ensure
        from podium.run.containers.images.reference import ImageError

        try:
            message = "ok\0" + ensure(image)
        except ImageError as exc:
            message = "err\0" + str(exc)
        os.write(out, message.encode()[:65536])
        code = 0
    except BaseException as exc:  # report, never return into the supervisor's code
        with contextlib.suppress(OSError):
            os.write(out, f"err\0{type(exc).__name__}: {exc}".encode()[:4000])
    finally:
        os._exit(code)


def _own_dir(path: Path, owner: tuple[int, int] | None, mode: int) -> None:
    """Make directory `path` if missing (never through a symlink), given to `owner`
    when this process is root; an existing one must be a real directory."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if path.is_symlink() or not path.is_dir():
            raise ContainerError(f"{path} is not a directory") from None
        return
    except OSError as exc:
        raise ContainerError(f"cannot make {path}: {exc.strerror}") from None
    if owner is not None and os.geteuid() == 0:
        os.chown(path, *owner)


def image_cache_key(image: str, st: os.stat_result) -> str:
    """The directory name of squashfs `image` (its stat `st`) in a user's image cache:
    one per version of the file (path, device, inode, size, modification time)."""
    version = f"{os.path.realpath(image)}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}"
    return hashlib.sha256(f"{version}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]


def _unpacked(image: str, cache: Path, who: Identity) -> str:
    """The root tree of squashfs `image`, unpacked as the user (so it holds only what
    the user could read, every file the user's) into the user's cache, once per
    version of the file; raises ContainerError when the user cannot read it or it is
    not a squashfs."""
    with who.entered():
        try:
            st = os.stat(image)
        except OSError as exc:
            raise ContainerError(f"--container-image={image}: {exc.strerror}") from None
        if not stat.S_ISREG(st.st_mode):  # a FIFO would hold unsquashfs (and the job)
            raise ContainerError(
                f"--container-image={image}: not a squashfs file or an image directory"
            )
        key = image_cache_key(image, st)
        _own_dir(cache, None, 0o700)
        _own_dir(cache / key, None, 0o700)
        done = cache / key / "rootfs"
        lock = os.open(cache / key / "lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one unpacking at a time per image
        with who.entered():
            if done.is_dir():
                os.utime(cache / key, follow_symlinks=False)  # recently used
                return str(done)
            partial = cache / key / f"partial-{os.getpid()}"
        run = subprocess.run(
            ["unsquashfs", "-no-xattrs", "-no-progress", "-quiet", "-d", str(partial), image],
            capture_output=True, text=True, errors="replace", cwd="/", check=False,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, **who.subprocess_kwargs(),
        )  # fmt: skip
        with who.entered():
            if run.returncode == 0 and partial.is_dir() and not partial.is_symlink():
                os.rename(partial, done)
                return str(done)
        subprocess.run(
            ["rm", "-rf", "--one-file-system", str(partial)], check=False, cwd="/",
            capture_output=True, **who.subprocess_kwargs(),
        )  # fmt: skip
        lines = [x.strip() for x in (run.stderr + run.stdout).splitlines() if x.strip()]
        why = lines[-1] if lines else f"unsquashfs exited {run.returncode}"
        raise ContainerError(f"--container-image={image}: not a squashfs you can read: {why}")
    finally:
        os.close(lock)


def _save_path(request: dict[str, Any]) -> str | None:
    """--container-save's file, relative paths from the job's working directory."""
    save = request.get("save")
    if not save:
        return None
    return os.path.join(str(request.get("work_dir") or "/"), str(save))


def remove(state: Path | str) -> None:
    """Remove a container's state directory (its writable layers), as its user:
    overlayfs leaves a work directory its owner may not enter, so permissions are
    opened first."""
    for root, dirs, _ in os.walk(state):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)
    shutil.rmtree(state, ignore_errors=True)


# -- the task's half ---------------------------------------------------------------


def enter(c: dict[str, Any], procid: int, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """Move this process (a task's child, already the user) into container `c` (from
    `prepare`); return the environment to exec with and the command prefix ('' or
    the image's rc for --container-entrypoint). Raises ContainerError."""
    uid, gid = os.getuid(), os.getgid()
    # Having changed its ids from root, the process is not dumpable, which leaves its
    # /proc/self files root's: the uid map could not be written. It is the user's
    # alone now, and exec comes next (which sets dumpability from the program).
    libc_call("prctl", PR_SET_DUMPABLE, 1, 0, 0, 0)
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    inside = 0 if c["remap_root"] else uid
    write_proc("/proc/self/setgroups", "deny")
    write_proc("/proc/self/uid_map", f"{inside} {uid} 1")
    write_proc("/proc/self/gid_map", f"{0 if c['remap_root'] else gid} {gid} 1")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    target = c["target"]
    if c["layers"] is not None:
        layer = os.path.join(c["layers"], "" if c["named"] else f"task-{procid}")
        upper, work = os.path.join(layer, "upper"), os.path.join(layer, "work")
        os.makedirs(upper, exist_ok=True)
        os.makedirs(work, exist_ok=True)
        if c["named"]:  # one task at a time in a named container's layer
            lock = os.open(os.path.join(layer, "lock"), os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ContainerError(
                    f"the container {os.path.basename(layer)} is in use by another task"
                ) from None  # the lock stays held by this process, through exec
        options = f"lowerdir={c['rootfs']},upperdir={upper},workdir={work},userxattr"
        mount("overlay", target, "overlay", 0, options)
    else:
        mount(c["rootfs"], target, None, MS_BIND | MS_REC)
        remount_readonly(target)
    mount("/proc", point(target, "/proc", True), None, MS_BIND | MS_REC)
    mount("/sys", point(target, "/sys", True), None, MS_BIND | MS_REC)
    env = _image_env(env, c["env_names"], target)
    dev = point(target, "/dev", True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755")
    for node in [f"/dev/{n}" for n in DEV_NODES]:
        if os.path.exists(node):
            mount(node, point(target, node, False), None, MS_BIND)
    for sub in ("pts", "shm"):
        os.mkdir(f"{dev}/{sub}", 0o755)
    mount("/dev/pts", f"{dev}/pts", None, MS_BIND | MS_REC)
    for name, points_to in DEV_LINKS.items():
        os.symlink(points_to, f"{dev}/{name}")
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("tmpfs", point(target, "/tmp", True), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    env = give_gpus(target, c["gpus"], c["driver_files"], env)
    for etc in ("/etc/hosts", "/etc/resolv.conf"):
        if (
            os.path.isfile(etc)
            and os.path.lexists(target + etc)
            and not os.path.islink(target + etc)
        ):
            mount(etc, target + etc, None, MS_BIND)
    binds: list[tuple[str, str, list[str]]] = [(c["home"], c["home"], [])] if c["home"] else []
    for src, dst, flags in binds + [tuple(m) for m in c["mounts"]]:
        if not os.path.exists(src):
            raise ContainerError(f"--container-mounts: {src} does not exist or is not yours to see")
        where = point(target, dst, os.path.isdir(src))
        mount(src, where, None, MS_BIND | MS_REC)
        if "ro" in flags:
            remount_readonly(where)
        for flag in flags:
            if flag in PROPAGATION:
                mount(None, where, None, PROPAGATION[flag])
    os.chroot(target)
    try:
        os.chdir(c["workdir"])
    except OSError as exc:
        raise ContainerError(f"--container-workdir={c['workdir']}: {exc.strerror}") from None
    return env, "/etc/rc" if c["entrypoint"] else ""


def _image_env(env: dict[str, str], keep: list[str], target: str = "") -> dict[str, str]:
    """The job's environment with the image's (its /etc/environment, as enroot writes
    it, read under `target`) over it, except for the names in `keep`
    (--container-env) and the job's own NVIDIA_* settings (as enroot's hook keeps
    the caller's), which keep the job's values."""
    merged = dict(env)
    keep = [*keep, *(k for k in env if k.startswith("NVIDIA_"))]
    path = f"{target}/etc/environment"
    if target and os.path.islink(path):
        return merged  # a link could name a host file: the image's own file only
    try:
        with open(path, errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return merged
    for line in lines:
        line = line.strip()
        if line.startswith("export "):
            line = line[7:]
        name, sep, value = line.partition("=")
        if not sep or not name.isidentifier() or name in keep:
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        merged[name] = value
    return merged


__all__ = ["ContainerError", "enter", "prepare", "remove"]
