"""Real-time scheduling of one process: SCHED_FIFO priority, CPU affinity, locked memory.

A deploy stack keeps its control loop ahead of everything else on the robot computer
(perception, logging, a browser): the driver first, then the safety supervisor, then the
policy, then the estimator, each preempting whatever runs at normal priority. Linux gives
that with SCHED_FIFO; it needs a privilege (root, CAP_SYS_NICE, or an ``rtprio`` limit in
limits.conf), and a refusal must say which one is missing and how to grant it, while the
node runs on at normal priority (a robot without its supervisor is worse than a slow one).

The plan asks for it per node through one environment variable (``encode``/``decode``); the
node applies it once it is built (its start-up at normal priority, where seconds of CPU cannot
use up a CPU's real-time share), to every thread it has (DDS receive threads, the executor,
ONNX Runtime's pool); the threads it starts later inherit the policy and the affinity.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys
from dataclasses import dataclass, field

from sim2real.core.errors import InputError

# SCHED_FIFO priorities by plan role, ordered as the chain must preempt: the hardware
# (driver, bridge or sim) > the safety supervisor > the policy runtime > the estimator.
# Below the kernel's migration and watchdog threads (99); on a PREEMPT_RT kernel the chain
# preempts interrupt threads (50), so the network card's must be raised above it there when
# the robot's data comes over Ethernet (docs/realtime.md).
ROLE_PRIORITY = {"hardware": 80, "safety": 70, "control": 60, "estimation": 50}
# The environment of a control-chain node: one BLAS thread (numpy's arrays here are small, and
# an idle BLAS worker spins for a while after each call, at the node's real-time priority).
CHAIN_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}

_MCL_CURRENT, _MCL_FUTURE = 1, 2  # sys/mman.h
_CAP_IPC_LOCK, _CAP_SYS_NICE = 14, 23  # linux/capability.h

FIX = (
    "to allow it: run as root, or put `@realtime - rtprio 98` and `@realtime - memlock unlimited` in "
    "/etc/security/limits.d/99-realtime.conf, `sudo groupadd -f realtime && sudo usermod -aG realtime $USER`, "
    "and log in again; in Docker: `docker run --cap-add=SYS_NICE --cap-add=IPC_LOCK --ulimit rtprio=98 "
    "--ulimit memlock=-1 ...` (docs/realtime.md)"
)


class RealtimeRequestError(InputError):
    """A request that cannot be read; the message names the variable and the fix."""


@dataclass(frozen=True)
class RealtimeRequest:
    """What one process asks for. ``priority`` 0 = normal scheduling (affinity only)."""

    priority: int = 0
    cpus: tuple[int, ...] = ()
    lock_memory: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.priority <= 99:
            raise RealtimeRequestError(f"SCHED_FIFO priority {self.priority} is outside 1..99 (0 = normal)")
        if any(cpu < 0 for cpu in self.cpus):
            raise RealtimeRequestError(f"CPU ids {list(self.cpus)} must be >= 0")

    @property
    def empty(self) -> bool:
        return not (self.priority or self.cpus or self.lock_memory)

    def encode(self) -> str:
        return json.dumps(
            {"priority": self.priority, "cpus": list(self.cpus), "lock_memory": self.lock_memory}, separators=(",", ":")
        )

    @classmethod
    def decode(cls, text: str) -> "RealtimeRequest":
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or set(raw) - {"priority", "cpus", "lock_memory"}:
                raise ValueError("expected an object with priority, cpus, lock_memory")
            return cls(
                int(raw.get("priority", 0)),
                tuple(int(c) for c in raw.get("cpus", ())),
                bool(raw.get("lock_memory", False)),
            )
        except (ValueError, TypeError) as exc:
            raise RealtimeRequestError(
                f"cannot read the real-time request {text!r} ({exc}); it is written by the plan "
                "(realtime:=true): start the node from `ros2 launch sim2real bringup.launch.py` or `sim2real up`, "
                "or unset the variable"
            ) from None


@dataclass
class RealtimeOutcome:
    """What a process got and what it did not, each refusal with its reason."""

    granted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        if self.granted:
            out.append("real-time: " + ", ".join(self.granted))
        if self.refused:
            out.append(
                "warning: real-time: could not get "
                + "; ".join(self.refused)
                + "; this node runs on without it. "
                + FIX
            )
        return out


@dataclass(frozen=True)
class Privileges:
    """What this process may ask the kernel for (read, never changed)."""

    rtprio_limit: int  # RLIMIT_RTPRIO soft limit (highest SCHED_FIFO priority without CAP_SYS_NICE)
    memlock_unlimited: bool
    memlock_limit: int  # bytes; -1 when unlimited
    cap_sys_nice: bool
    cap_ipc_lock: bool

    def max_priority(self) -> int:
        return 99 if self.cap_sys_nice else min(self.rtprio_limit, 99)

    def may_lock_memory(self) -> bool:
        return self.cap_ipc_lock or self.memlock_unlimited

    def summary(self, highest: int) -> str:
        """One line a launcher prints before starting the chain at priorities up to ``highest``."""
        parts = []
        if self.max_priority() >= highest:
            parts.append(
                f"SCHED_FIFO up to {self.max_priority()} "
                f"({'CAP_SYS_NICE' if self.cap_sys_nice else f'rtprio limit {self.rtprio_limit}'})"
            )
        else:
            parts.append(f"no SCHED_FIFO priority {highest} (rtprio limit {self.rtprio_limit}, no CAP_SYS_NICE)")
        parts.append(
            "memory locking allowed"
            if self.may_lock_memory()
            else f"no memory locking (memlock limit {self.memlock_limit // 1024} KiB, no CAP_IPC_LOCK)"
        )
        return "; ".join(parts)


def supported() -> bool:
    """Real-time scheduling as asked here is Linux's (SCHED_FIFO per thread, RLIMIT_RTPRIO, mlockall)."""
    return sys.platform.startswith("linux") and hasattr(os, "sched_setscheduler")


def privileges() -> Privileges:
    import resource  # POSIX only: imported here so that the plan loads anywhere

    rtprio = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
    memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    effective = _effective_capabilities()
    return Privileges(
        rtprio_limit=99 if rtprio == resource.RLIM_INFINITY else int(rtprio),
        memlock_unlimited=memlock == resource.RLIM_INFINITY,
        memlock_limit=-1 if memlock == resource.RLIM_INFINITY else int(memlock),
        cap_sys_nice=bool(effective >> _CAP_SYS_NICE & 1),
        cap_ipc_lock=bool(effective >> _CAP_IPC_LOCK & 1),
    )


def _effective_capabilities() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _threads() -> list[int]:
    """This process's threads: both calls act per thread, and imports may have started some
    already (a BLAS pool); the ones started later inherit from the thread that starts them."""
    try:
        return sorted(int(tid) for tid in os.listdir("/proc/self/task"))
    except OSError:
        return [0]


def _each_thread(call) -> None:
    """``call(tid)`` for every thread of this process; one that ended meanwhile is skipped. Until
    a pass finds no new thread: one started meanwhile by a thread not yet changed would inherit
    the old scheduling."""
    done: set[int] = set()
    while pending := [thread for thread in _threads() if thread not in done]:
        for thread in pending:
            done.add(thread)
            try:
                call(thread)
            except ProcessLookupError:
                continue


def _lock_memory() -> tuple[str, str]:
    """mlockall, current and future pages: (what was granted, what was refused), one of them ''."""
    have = privileges()
    if not have.may_lock_memory():
        # MCL_FUTURE under a finite limit would make later allocations fail: never half-lock.
        return "", (
            f"locked memory (the memlock limit is {have.memlock_limit // 1024} KiB and "
            "the process has no CAP_IPC_LOCK; page faults may stall the loop)"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(_MCL_CURRENT | _MCL_FUTURE) == 0:
        return "memory locked", ""
    code = ctypes.get_errno()
    return "", (
        f"locked memory (mlockall: {os.strerror(code)}"
        + ("; not enough memory to lock the process" if code == errno.ENOMEM else "")
        + ")"
    )


def apply(request: RealtimeRequest) -> RealtimeOutcome:
    """Ask the kernel for ``request`` for this process: its threads now and every thread it starts later."""
    outcome = RealtimeOutcome()
    if request.empty:
        return outcome
    if not supported():
        outcome.refused.append(f"any of it (real-time scheduling here is Linux's; this is {sys.platform})")
        return outcome
    # Memory first, at the scheduling the process has: locking faults in every page it has mapped
    # (each thread's whole stack), work that must not run at real-time priority.
    lock_granted, lock_refused = _lock_memory() if request.lock_memory else ("", "")
    if request.cpus:
        try:
            _each_thread(lambda thread: os.sched_setaffinity(thread, request.cpus))
            outcome.granted.append(f"CPUs {list(request.cpus)}")
        except OSError as exc:
            outcome.refused.append(
                f"CPUs {list(request.cpus)} ({exc.strerror}; this computer offers {available_cpus()})"
            )
    if request.priority:
        try:
            _each_thread(lambda thread: os.sched_setscheduler(thread, os.SCHED_FIFO, os.sched_param(request.priority)))
            outcome.granted.append(f"SCHED_FIFO priority {request.priority}")
        except PermissionError:
            have = privileges()
            if have.max_priority() >= request.priority:
                why = (
                    "refused although the process may ask for it: in a container, the cgroup may give "
                    "real-time tasks no runtime (docker run --cpu-rt-runtime=950000)"
                )
            else:
                why = f"not permitted: the rtprio limit is {have.rtprio_limit} and the process has no CAP_SYS_NICE"
            outcome.refused.append(f"SCHED_FIFO priority {request.priority} ({why})")
        except OSError as exc:
            outcome.refused.append(f"SCHED_FIFO priority {request.priority} ({exc.strerror})")
    if lock_granted:
        outcome.granted.append(lock_granted)
    if lock_refused:
        outcome.refused.append(lock_refused)
    return outcome


def below_own_priority() -> None:
    """Run the calling thread one SCHED_FIFO step below its process's priority (nothing at
    normal priority). For a worker beside a real-time loop, e.g. a model loader: at the same
    priority on one CPU it would hold the loop off until it blocked; at normal priority it could
    be preempted while holding the GIL the loop waits for. Call it from a thread started after
    the node took its scheduling (nodes.lifecycle.run applies it once the node is built, to every
    thread then alive): a thread started in a node's __init__ would be raised to the node's own."""
    if not supported() or os.sched_getscheduler(0) != os.SCHED_FIFO:
        return
    priority = os.sched_getparam(0).sched_priority
    if priority > 1:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority - 1))


def apply_encoded(text: str | None) -> RealtimeOutcome:
    """The node side: apply the plan's request if there is one (RealtimeRequestError if unreadable)."""
    if not text:
        return RealtimeOutcome()
    return apply(RealtimeRequest.decode(text))
