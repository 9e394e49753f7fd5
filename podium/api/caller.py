"""Who is asking: one identity for every layer (stdlib only).

The embedded daemon builds it from the socket's peer credentials, the Slurm backend
from the process's own ids; the spec's allow-lists read its groups.
"""

from __future__ import annotations

import grp
import os
import pwd
from typing import NamedTuple


class Caller(NamedTuple):
    """A user making a request: ids, login name, whether they administer the cluster,
    and (when an allow-list names groups) the names of their Unix groups."""

    uid: int
    gid: int
    name: str
    is_admin: bool = False
    groups: tuple[str, ...] = ()
    cwd: str | None = None  # where the caller's process is, as the kernel says (never
    # the request): a job's working directory there needs no look as the user

    def with_groups(self) -> Caller:
        """This caller with `groups` filled from the system's group database."""
        return self._replace(groups=group_names(self.name, self.gid))


def user_name(uid: int) -> str:
    """The login name of `uid`, or the number when it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_names(name: str, gid: int) -> tuple[str, ...]:
    """The names of every Unix group user `name` belongs to (primary and supplementary)."""
    try:
        gids = os.getgrouplist(name, gid)
    except (KeyError, OSError):
        gids = [gid]
    names = []
    for g in gids:
        try:
            names.append(grp.getgrgid(g).gr_name)
        except KeyError:
            names.append(str(g))
    return tuple(names)


def this_process(admin_uids: tuple[int, ...] = (0,)) -> Caller:
    """The user running this process (an admin when root or among `admin_uids`)."""
    uid = os.getuid()
    return Caller(uid, os.getgid(), user_name(uid), uid in admin_uids)
