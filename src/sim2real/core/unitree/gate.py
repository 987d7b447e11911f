"""When the Go2 bridge may command the robot, and which frame it sends: ROS-free.

Three states:

- **waiting**: preflight has not passed. Nothing is written on rt/lowcmd (the robot's sport
  mode may still be driving the motors) and no state is published (the supervisor's stand-up
  must start from where the robot is when commands can flow, not from a pose a second old).
- **armed**: preflight passed. Valid states are published; each command is forwarded and the
  newest frame is sent again with every LowState while it is younger than the command timeout,
  the damping frame after that. After arming or a timeout, a command is forwarded only when
  every target is within ``RESYNC_TOLERANCE`` of the measured joints: a supervisor that stalled
  comes back with targets the damped robot has left.
- **latched**: something failed after arming (another rt/lowcmd writer, shutdown). Damping
  frames only, no state published (the supervisor trips on stale /joint_states), until the
  bridge restarts: it never re-arms by itself.
"""
from __future__ import annotations

import collections
import threading
from typing import Optional, Sequence

import numpy as np

from sim2real.core.joint_command import JointTargets
from sim2real.core.unitree.low_level import Go2LowLevel, LowStateReading
from sim2real.core.unitree.messages import LowCmd_
from sim2real.core.unitree.preflight import preflight

PREFLIGHT_WINDOW_S = 1.0
PREFLIGHT_EVERY_S = 0.25  # while it fails: a check walks the whole window
DISCOVERY_S = 1.0         # DDS discovery has found the other rt/lowcmd writers by then
RESYNC_TOLERANCE = 0.25   # rad between a resuming command's targets and the measured joints
TICK_RESTART = 1000       # ms backwards: the robot restarted (or the tick wrapped), not a replay

WAITING, ARMED, LATCHED = "waiting", "armed", "latched"
COUNTS = ("states", "bad_crc", "stale_tick", "forwarded", "refused_waiting", "refused_far", "timeouts")


class BridgeGate:
    def __init__(self, low_level: Go2LowLevel, command_timeout: float, created: float):
        self.low_level = low_level
        self.command_timeout = command_timeout
        self.state = WAITING
        self.failures: list[str] = ["no lowstate yet"]
        self.counts = dict.fromkeys(COUNTS, 0)  # every key from the start: read from another thread
        self._created = created
        self._lock = threading.Lock()
        self._window: collections.deque[tuple[float, LowStateReading]] = collections.deque()
        self._writers: Optional[list[str]] = None  # None: discovery not trusted yet
        self._preflight_at = -float("inf")
        self._last_tick: Optional[int] = None
        self._measured: Optional[np.ndarray] = None
        self._frame: Optional[LowCmd_] = None  # the newest command frame
        self._last_command = -float("inf")
        self._synced = False  # a command near the measured joints came since arming or the last timeout
        self._damping = low_level.damping()

    # -- inputs ------------------------------------------------------------------------------
    def writers(self, writers: Sequence[str], now: float) -> Optional[str]:
        """Other rt/lowcmd writers found by discovery; a reason when this latches the bridge."""
        if now - self._created < DISCOVERY_S:
            return None
        with self._lock:
            self._writers = list(writers)
            if writers and self.state == ARMED:
                return self._latch(f"another writer on rt/lowcmd ({', '.join(writers)}): the robot's sport mode "
                                   "came back or a second controller runs; restart the bridge after stopping it")
        return None

    def lowstate(self, reading: LowStateReading, received: float) -> tuple[bool, Optional[LowCmd_]]:
        """(publish this state, frame to send now or None) for a LowState received at ``received``."""
        with self._lock:
            self._window.append((received, reading))
            while self._window and received - self._window[0][0] > PREFLIGHT_WINDOW_S:
                self._window.popleft()
            valid = self._valid(reading)
            if self.state == WAITING and received - self._preflight_at >= PREFLIGHT_EVERY_S:
                self._preflight_at = received
                self._run_preflight(received)
            if self.state == LATCHED:
                return False, self._damping
            if self.state == WAITING:
                return False, None
            if self._frame is None or received - self._last_command > self.command_timeout:
                if self._frame is not None:
                    self.counts["timeouts"] += 1
                    self._frame, self._synced = None, False
                return valid, self._damping
            return valid, self._frame

    def _valid(self, reading: LowStateReading) -> bool:
        if not reading.crc_ok:
            self.counts["bad_crc"] += 1
            return False
        last = self._last_tick
        if last is not None and reading.tick <= last and last - reading.tick < TICK_RESTART:
            self.counts["stale_tick"] += 1
            return False
        self._last_tick = reading.tick
        self._measured = reading.position
        self.counts["states"] += 1
        return True

    def _run_preflight(self, now: float) -> None:
        if now - self._window[0][0] < 0.9 * PREFLIGHT_WINDOW_S:
            self.failures = ["collecting the first second of lowstate"]
            return
        writers = self._writers if self._writers is not None else []
        failures = preflight(list(self._window), PREFLIGHT_WINDOW_S, self.low_level.profile, writers)
        if self._writers is None:
            failures.append("rt/lowcmd writers not known yet (DDS discovery takes about a second)")
        self.failures = failures
        if not failures:
            self.state = ARMED

    def command(self, targets: JointTargets, now: float) -> tuple[Optional[LowCmd_], str]:
        """The frame to write for the supervisor's command (None: not forwarded, with why)."""
        with self._lock:
            if self.state != ARMED:
                self.counts["refused_waiting"] += 1
                return None, ("preflight has not passed: " + "; ".join(self.failures) if self.state == WAITING
                              else "latched: " + "; ".join(self.failures))
            if not self._synced:
                far = np.abs(targets.position - self._measured)
                if far.max() > RESYNC_TOLERANCE:
                    self.counts["refused_far"] += 1
                    joint = self.low_level.profile.joint_names[int(np.argmax(far))]
                    return None, (f"targets {far.max():.2f} rad from the measured joints ({joint}), over "
                                  f"{RESYNC_TOLERANCE} rad after arming or a command timeout: damping until the "
                                  "supervisor commands from where the robot is (damp and reset it)")
                self._synced = True
            self._frame = self.low_level.command(targets)
            self._last_command = now
            self.counts["forwarded"] += 1
            return self._frame, ""

    def timed_out(self, now: float) -> Optional[LowCmd_]:
        """The damping frame when commands stopped (to write at once, between LowStates)."""
        with self._lock:
            if self.state == ARMED and self._frame is not None and now - self._last_command > self.command_timeout:
                self._frame, self._synced = None, False
                self.counts["timeouts"] += 1
                return self._damping
        return None

    def shutdown(self) -> LowCmd_:
        with self._lock:
            self._latch("the bridge is stopping")
        return self._damping

    def _latch(self, reason: str) -> str:
        self.state, self.failures, self._frame = LATCHED, [reason], None
        return reason

    @property
    def damping(self) -> LowCmd_:
        return self._damping
