"""Times on the steady clock, for judging silence and freshness in real time.

DDS stamps a message's receipt, and drivers stamp their states, on the system clock, which NTP
or an operator (``date -s``) may step while the graph runs (NTP at boot on a robot computer
without a real-time clock). A node that measures a silence as the system clock's now minus a
receipt sees a stream silent for the whole step when the clock steps forward between a message's
receipt and its read. Measured on the steady (monotonic) clock, a step moves only what was
received just before it and read just after, and by no more than the interval between two reads.
"""

from __future__ import annotations

import ctypes
import time
from typing import Callable

TIME_ERROR = 5  # adjtimex(2)'s clock state: not synchronised (STA_UNSYNC), or a PPS signal fault
CLOCK_NOT_SYNCHRONISED = (
    "the system clock is not synchronised (no NTP client, chrony or systemd-timesyncd, reports it so): if one steps it while the "
    "graph runs, the supervisor may hold the robot once on a command that looks old; let it synchronise "
    "before you launch (chronyc waitsync), or ignore this on a robot with no time source at all"
)


def system_ns() -> int:
    """The system clock, ns: what DDS stamps receipts with and drivers stamp states with. The
    nodes read it through this name (``steady_time.system_ns()``), the one place a test steps it."""
    return time.time_ns()


def steady_receive_ns(
    received_wall_ns: int, wall_now_ns: int, steady_now_ns: int, previous_steady_ns: int | None
) -> int:
    """When a message read now was received, on the steady clock: its age on the wall clock
    (``wall_now_ns - received_wall_ns``, at least 0) back from ``steady_now_ns``, and no earlier
    than the previous read (``previous_steady_ns``: what that read took came before this message;
    None when nothing bounds it). A system clock stepped between the receipt and the read moves
    the age by the step; the bounds keep the error within one read interval."""
    steady = steady_now_ns - max(0, wall_now_ns - received_wall_ns)
    if previous_steady_ns is not None and steady < previous_steady_ns:
        return min(previous_steady_ns, steady_now_ns)
    return steady


class SteadyLine:
    """The steady clock on the system clock's time line as it stood at construction: it reads as
    the system time until the system clock is stepped, and goes on steadily after. System-clock
    times (a receipt, a stamp) are brought onto it by their age at the moment they are read.

    ``wall_ns``: the system clock (default :func:`system_ns`, looked up at each call)."""

    def __init__(self, wall_ns: Callable[[], int] | None = None):
        self._wall_ns = wall_ns or (lambda: system_ns())
        self.offset_ns = self._wall_ns() - time.monotonic_ns()

    def now_ns(self) -> int:
        return time.monotonic_ns() + self.offset_ns

    def receipt_ns(self, received_wall_ns: int, previous_read_ns: int | None = None) -> int:
        """A receipt's time (at most now; see :func:`steady_receive_ns` for ``previous_read_ns``)."""
        return steady_receive_ns(received_wall_ns, self._wall_ns(), self.now_ns(), previous_read_ns)

    def stamp_ns(self, stamp_wall_ns: int) -> int:
        """A stamp's time: its age on the system clock back from now (a stamp from a clock ahead
        of this one stays ahead)."""
        return self.now_ns() - (self._wall_ns() - stamp_wall_ns)


class SteadyReads:
    """Receipts taken in reads (a poll, a drain, a callback) on a :class:`SteadyLine`: a read
    takes only what arrived since the previous read began, so each receipt is held no earlier
    than that. Call :meth:`begin` as a read starts, then :meth:`receipt_ns` for what it takes."""

    def __init__(self, line: SteadyLine):
        self.line = line
        self._began_ns: int | None = None
        self._floor_ns: int | None = None

    def begin(self) -> None:
        self._floor_ns, self._began_ns = self._began_ns, self.line.now_ns()

    def receipt_ns(self, received_wall_ns: int) -> int:
        return self.line.receipt_ns(received_wall_ns, self._floor_ns)


def system_clock_synchronised(adjtimex: Callable[[ctypes.Array], int] | None = None) -> bool | None:
    """Whether the kernel holds the system clock synchronised (an NTP client, chrony or
    systemd-timesyncd, has set it and keeps it): adjtimex(2), which only reads when asked with
    ``modes`` 0. None where it cannot be asked (not Linux). ``adjtimex``: the call (a test's)."""
    if adjtimex is None:
        try:
            adjtimex = ctypes.CDLL(None).adjtimex
        except (OSError, AttributeError):
            return None
    timex = ctypes.create_string_buffer(512)  # struct timex (208 bytes on 64-bit Linux), all 0: read only
    state = adjtimex(timex)
    if state < 0:
        return None
    return state != TIME_ERROR
