"""Device confinement on cgroup v2: an eBPF device program that denies listed devices.

cgroup v2 has no devices.deny file: the kernel asks a BPF_PROG_TYPE_CGROUP_DEVICE
program attached to the cgroup whether each open/mknod of a device is allowed (as
Slurm's and runc's v2 code do). `deny_devices(cgroup, devices)` builds such a program
(deny exactly these (type, major, minor) devices, allow everything else), loads it
with the bpf(2) system call and attaches it to the cgroup with BPF_F_ALLOW_MULTI, so
programs set by the parent (systemd's) still apply.

Standard library only (ctypes); needs root (CAP_SYS_ADMIN, CAP_BPF).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Sequence
from pathlib import Path

# bpf(2) system call numbers by architecture.
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351, "riscv64": 280}
_BPF_PROG_LOAD = 5
_BPF_PROG_ATTACH = 8
_BPF_PROG_TYPE_CGROUP_DEVICE = 15
_BPF_CGROUP_DEVICE = 6
_BPF_F_ALLOW_MULTI = 2
_ATTR_SIZE = 128

# The instructions used (struct bpf_insn: code, dst|src<<4, off, imm).
_LDX_W = 0x61  # dst = *(u32 *)(src + off)
_AND_K32 = 0x54  # dst &= imm (32-bit)
_JNE_K = 0x55  # if dst != imm goto +off
_MOV_K = 0xB7  # dst = imm
_EXIT = 0x95

_TYPES = {"c": 2, "b": 1}  # BPF_DEVCG_DEV_CHAR, BPF_DEVCG_DEV_BLOCK


class BpfError(Exception):
    """The program could not be loaded or attached; the message says why."""


Device = tuple[str, int, int]  # ("c" or "b", major, minor)


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def deny_program(devices: Sequence[Device]) -> bytes:
    """The program's instructions: return 0 (deny) for each listed device, 1 otherwise.

    The context is struct bpf_cgroup_dev_ctx {u32 access_type; u32 major; u32 minor},
    where the low 16 bits of access_type are the device type.
    """
    code = [
        _insn(_LDX_W, dst=2, src=1, off=0),
        _insn(_AND_K32, dst=2, imm=0xFFFF),
        _insn(_LDX_W, dst=3, src=1, off=4),
        _insn(_LDX_W, dst=4, src=1, off=8),
    ]
    for kind, major, minor in devices:
        code += [  # five instructions: any mismatch jumps past this device's block
            _insn(_JNE_K, dst=2, off=4, imm=_TYPES[kind]),
            _insn(_JNE_K, dst=3, off=3, imm=major),
            _insn(_JNE_K, dst=4, off=2, imm=minor),
            _insn(_MOV_K, dst=0, imm=0),
            _insn(_EXIT),
        ]
    code += [_insn(_MOV_K, dst=0, imm=1), _insn(_EXIT)]
    return b"".join(code)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    machine = os.uname().machine
    number = _SYS_BPF.get(machine)
    if number is None:
        raise BpfError(f"bpf(2) is not known on {machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(number, cmd, attr, _ATTR_SIZE))
    if result < 0:
        errno = ctypes.get_errno()
        raise BpfError(f"bpf({cmd}): {os.strerror(errno)}")
    return result


def deny_devices(cgroup: Path, devices: Sequence[Device]) -> None:
    """Attach a program to the v2 `cgroup` that denies `devices` (read, write, mknod)
    to every process in it. Raises BpfError when the kernel refuses."""
    insns = deny_program(devices)
    insn_buf = ctypes.create_string_buffer(insns, len(insns))
    license_buf = ctypes.create_string_buffer(b"GPL")
    log_buf = ctypes.create_string_buffer(4096)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into(
        "<IIQQIIQ",
        attr,
        0,
        _BPF_PROG_TYPE_CGROUP_DEVICE,
        len(insns) // 8,
        ctypes.addressof(insn_buf),
        ctypes.addressof(license_buf),
        1,  # log level: the verifier says why it refuses
        len(log_buf),
        ctypes.addressof(log_buf),
    )
    try:
        prog_fd = _bpf(_BPF_PROG_LOAD, attr)
    except BpfError as exc:
        detail = log_buf.value.decode(errors="replace").strip().splitlines()
        raise BpfError(f"{exc}{': ' + detail[-1] if detail else ''}") from None
    try:
        cgroup_fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            attach = ctypes.create_string_buffer(_ATTR_SIZE)
            struct.pack_into(
                "<IIII", attach, 0, cgroup_fd, prog_fd, _BPF_CGROUP_DEVICE, _BPF_F_ALLOW_MULTI
            )
            _bpf(_BPF_PROG_ATTACH, attach)
        finally:
            os.close(cgroup_fd)
    finally:
        os.close(prog_fd)  # the attachment keeps the program alive with the cgroup


__all__ = ["BpfError", "Device", "deny_devices", "deny_program"]
