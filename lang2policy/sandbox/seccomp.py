"""A seccomp-BPF system-call filter for the sandbox child, built without libseccomp.

The filter is a deny-list on top of what CPython needs to run already-loaded code: no files
opened at all (so no reads of secrets and no writes), no sockets, no new processes or programs,
no signals or scheduling changes aimed at other processes (including the indirect ways: fcntl
F_SETOWN/F_SETSIG, ioctl FIOSETOWN/TIOCSTI), no executable memory (ctypes/libffi trampolines),
no changes to limits, namespaces, credentials or the filter itself. Every syscall newer than
the last one reviewed here fails with ENOSYS, so a new kernel cannot open a hole. Denied calls
fail with EPERM or EACCES (Python raises ``PermissionError``); a foreign ABI kills the process.

Only x86_64 has a tested syscall table; elsewhere ``install`` reports why it did nothing and
the other layers (rlimits, namespaces, Python guards) still apply.

Runs inside the child, so it uses only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_PROT_EXEC = 0x4
# Syscall numbers above this have not been reviewed: they fail with ENOSYS.
_LAST_REVIEWED = 449  # futex_waitv (Linux 5.16); 450+ includes fchmodat2, setxattrat, ...

# Offsets in struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (low word first).
_OFFSET_NR = 0
_OFFSET_ARCH = 4


def _arg_offset(index: int) -> int:
    return 16 + 8 * index


# x86_64 system calls the child may never make, grouped by what they would let it do.
X86_64_DENIED: dict[str, dict[str, int]] = {
    "files": {
        "open": 2, "creat": 85, "openat": 257, "openat2": 437, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "truncate": 76, "ftruncate": 77, "rename": 82, "mkdir": 83,
        "rmdir": 84, "link": 86, "unlink": 87, "symlink": 88, "chmod": 90, "fchmod": 91,
        "chown": 92, "fchown": 93, "lchown": 94, "mknod": 133, "utime": 132, "utimes": 235,
        "mkdirat": 258, "mknodat": 259, "fchownat": 260, "futimesat": 261, "unlinkat": 263,
        "renameat": 264, "linkat": 265, "symlinkat": 266, "fchmodat": 268, "utimensat": 280,
        "fallocate": 285, "renameat2": 316, "setxattr": 188, "lsetxattr": 189,
        "fsetxattr": 190, "getxattr": 191, "lgetxattr": 192, "listxattr": 194,
        "llistxattr": 195, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
        "memfd_create": 319, "chdir": 80, "fchdir": 81, "copy_file_range": 326, "splice": 275,
        "tee": 276, "vmsplice": 278, "inotify_init": 253, "inotify_add_watch": 254,
        "inotify_init1": 294, "fanotify_init": 300, "fanotify_mark": 301,
    },
    "network": {
        "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45,
        "sendmsg": 46, "recvmsg": 47, "shutdown": 48, "bind": 49, "listen": 50,
        "socketpair": 53, "setsockopt": 54, "accept4": 288, "recvmmsg": 299, "sendmmsg": 307,
    },
    "processes": {
        "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "clone3": 435, "execveat": 322,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "kcmp": 312, "setpgid": 109, "setsid": 112, "process_madvise": 440,
        "process_mrelease": 448, "get_robust_list": 274, "sched_setparam": 142,
        "sched_setscheduler": 144, "sched_setaffinity": 203, "sched_setattr": 314,
        "setpriority": 141, "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279,
    },
    "privileges": {
        "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setgroups": 116,
        "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123, "capset": 126,
        "setrlimit": 160, "prlimit64": 302, "prctl": 157, "seccomp": 317, "unshare": 272,
        "setns": 308, "chroot": 161, "pivot_root": 155, "personality": 135,
        "landlock_create_ruleset": 444, "landlock_add_rule": 445,
        "landlock_restrict_self": 446, "memfd_secret": 447,
    },
    "system": {
        "mount": 165, "umount2": 166, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "swapon": 167,
        "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171,
        "iopl": 172, "ioperm": 173, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "quotactl": 179,
        "quotactl_fd": 443, "acct": 163, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "syslog": 103, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
        "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64,
        "msgget": 68, "msgsnd": 69, "uselib": 134, "mbind": 237, "sync": 162, "syncfs": 306,
    },
}  # fmt: skip
# mmap/mprotect/pkey_mprotect are allowed unless they ask for executable memory (arg 2).
X86_64_NO_EXEC = {"mmap": 9, "mprotect": 10, "pkey_mprotect": 329}
# Commands that would signal or steer another process or a terminal: fcntl F_SETOWN, F_SETSIG,
# F_SETOWN_EX, F_SETLEASE, F_NOTIFY; ioctl TIOCSPGRP, TIOCSTI, FIOASYNC, FIOSETOWN, SIOCSPGRP.
X86_64_DENIED_COMMANDS = {
    72: (8, 10, 15, 1024, 1026),  # fcntl(fd, cmd, ...)
    16: (0x5410, 0x5412, 0x5452, 0x8901, 0x8902),  # ioctl(fd, cmd, ...)
}


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _ret(value: int) -> bytes:
    return _instruction(_RET_K, 0, 0, value)


def _deny_when_bits(number: int, arg: int, mask: int) -> list[bytes]:
    """For syscall ``number``: EPERM if ``args[arg] & mask``, else allow."""
    return [
        _instruction(_JEQ_K, 0, 4, number),
        _instruction(_LD_W_ABS, 0, 0, _arg_offset(arg)),
        _instruction(_JSET_K, 0, 1, mask),
        _ret(_RET_ERRNO | errno.EPERM),
        _ret(_RET_ALLOW),
    ]


def _deny_when_equal(number: int, arg: int, values: tuple[int, ...]) -> list[bytes]:
    """For syscall ``number``: EPERM if ``args[arg]`` is one of ``values``, else allow."""
    body = [_instruction(_LD_W_ABS, 0, 0, _arg_offset(arg))]
    for value in values:
        body += [_instruction(_JEQ_K, 0, 1, value), _ret(_RET_ERRNO | errno.EPERM)]
    body.append(_ret(_RET_ALLOW))
    return [_instruction(_JEQ_K, 0, len(body), number), *body]


def build_x86_64_filter() -> bytes:
    """The BPF program (raw ``struct sock_filter`` array) for x86_64."""
    prog = [
        _instruction(_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        _instruction(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _ret(_RET_KILL_PROCESS),
        _instruction(_LD_W_ABS, 0, 0, _OFFSET_NR),
        _instruction(_JGE_K, 0, 1, _X32_SYSCALL_BIT),  # x32 ABI numbers alias x86_64 ones
        _ret(_RET_KILL_PROCESS),
        _instruction(_JGE_K, 0, 1, _LAST_REVIEWED + 1),
        _ret(_RET_ERRNO | errno.ENOSYS),
    ]
    for group, calls in X86_64_DENIED.items():
        code = errno.EACCES if group == "files" else errno.EPERM
        for number in calls.values():
            prog += [_instruction(_JEQ_K, 0, 1, number), _ret(_RET_ERRNO | code)]
    for number in X86_64_NO_EXEC.values():
        prog += _deny_when_bits(number, 2, _PROT_EXEC)
    for number, commands in X86_64_DENIED_COMMANDS.items():
        prog += _deny_when_equal(number, 1, commands)
    prog.append(_ret(_RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str:
    """Install the filter on this process (irreversible). Returns "" on success, else why not."""
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        return f"no tested syscall table for {machine}"
    program = build_x86_64_filter()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"PR_SET_NO_NEW_PRIVS failed: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    address = ctypes.addressof(fprog)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, address, 0, 0) != 0:
        return f"PR_SET_SECCOMP failed: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    return ""
