"""When the Go2 bridge may command the robot, and which frame it sends: ROS-free.

Three states:

- **waiting**: preflight has not passed. Nothing is written on rt/lowcmd (the robot's sport
  mode may still be driving the motors) and no state is published (the supervisor's stand-up
  must start from where the robot is when commands can flow, not from a pose a second old).
- **armed**: preflight passed. Valid states are published; each command is forwarded and the
  newest frame is sent again with every LowState while it is younger than the command timeout,
  the damping frame after that. The first command after arming or a timeout is forwarded only
  when every target is within ``RESYNC_TOLERANCE`` of the measured joints: a supervisor that
  stalled comes back with targets the damped robot has left, and one whose commands reached
  the bridge only seconds after its stand-up began (slow DDS discovery) would start the robot
  mid-way through it, a jump. No state is published before arming, so a supervisor's first
  command is built on a measurement and passes.
- **latched**: something failed after arming (another rt/lowcmd writer, a second rt/lowstate
  writer, the robot's tick going back, shutdown). Damping frames only, no state published (the supervisor trips on stale
  /joint_states), until the bridge restarts: it never re-arms by itself.
- **stopped**: the bridge stopped before it ever armed: it writes nothing, as while waiting.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Optional, Sequence

import numpy as np

from sim2real.core.joint_command import JointTargets
from sim2real.core.unitree.frames import LowCmdFrame
from sim2real.core.unitree.low_level import Go2LowLevel, LowStateReading
from sim2real.core.unitree.preflight import SEVERAL_ROBOTS, preflight

PREFLIGHT_WINDOW_S = 1.0
PREFLIGHT_EVERY_S = 0.25  # while it fails: a check walks the whole window
DISCOVERY_S = 1.0  # DDS discovery has found the other rt/lowcmd writers by then
RESYNC_TOLERANCE = 0.25  # rad between a resuming command's targets and the measured joints
MEASUREMENT_FRESH_S = 0.5  # s: a measurement older than this cannot vouch for a resuming command
TICK_RESTART = 1000  # ms backwards: the robot restarted (or the tick wrapped), not a replay

WAITING, ARMED, LATCHED, STOPPED = "waiting", "armed", "latched", "stopped"
COUNTS = ("states", "bad_crc", "stale_tick", "forwarded", "refused_waiting", "refused_far", "timeouts")
SHUTDOWN_FRAMES = 20  # damping frames at shutdown, 2 ms apart: one lost packet leaves no targets


class BridgeGate:
    """Every rt/lowcmd write goes through here, under one lock: a frame decided on by one thread
    can never be written after another thread latched the bridge or timed the command out."""

    def __init__(
        self, low_level: Go2LowLevel, command_timeout: float, created: float, write: Callable[[LowCmdFrame], None]
    ):
        self.low_level = low_level
        self.command_timeout = command_timeout
        self.state = WAITING
        self.failures: list[str] = ["no lowstate yet"]
        self.counts = dict.fromkeys(COUNTS, 0)  # every key from the start: read from another thread
        self._write = write
        self._created = created
        self._lock = threading.Lock()
        self._window: collections.deque[tuple[float, LowStateReading]] = collections.deque()
        self._writers: Optional[list[str]] = None  # None: discovery not trusted yet
        self._state_writers: list[str] = []
        self._preflight_at = -float("inf")
        self._last_tick: Optional[int] = None
        self._measured: Optional[np.ndarray] = None
        self._measured_at = -float("inf")
        self._frame: Optional[LowCmdFrame] = None  # the newest command frame
        self._last_command = -float("inf")
        self._synced = False  # a command near the measured joints came since arming or the last timeout
        self._damping = low_level.damping_frame()

    @property
    def forwarding(self) -> bool:
        """Armed and a command is being sent (not damping)."""
        return self.state == ARMED and self._frame is not None

    # -- inputs ------------------------------------------------------------------------------
    def writers(self, writers: Sequence[str], now: float, state_writers: Sequence[str] = ()) -> Optional[str]:
        """Other rt/lowcmd writers and the rt/lowstate writers found by discovery; a reason when
        this latched the bridge."""
        if now - self._created < DISCOVERY_S:
            return None
        with self._lock:
            self._writers = list(writers)
            self._state_writers = list(state_writers)
            if writers and self.state == ARMED:
                return self._latch(
                    f"another writer on rt/lowcmd ({', '.join(writers)}): the robot's sport mode "
                    "came back or a second controller runs; restart the bridge after stopping it"
                )
            if len(state_writers) > 1 and self.state == ARMED:
                return self._latch(
                    f"rt/lowstate has {len(state_writers)} writers (participants "
                    f"{', '.join(state_writers)}): "
                    f"{SEVERAL_ROBOTS}; restart the bridge after"
                )
        return None

    def lowstate(self, reading: LowStateReading, received: float) -> bool:
        """Take a LowState received at ``received``, write the frame due now; True: publish it."""
        with self._lock:
            valid = self._valid(reading, received)
            if self.state == WAITING:  # the preflight's window: armed or latched, nothing reads it
                self._window.append((received, reading))
                while received - self._window[0][0] > PREFLIGHT_WINDOW_S:
                    self._window.popleft()
                if received - self._preflight_at >= PREFLIGHT_EVERY_S:
                    self._preflight_at = received
                    self._run_preflight(received)
            if self.state == LATCHED:
                self._write(self._damping)
                return False
            if self.state in (WAITING, STOPPED):
                return False
            if self._frame is not None and received - self._last_command > self.command_timeout:
                self.counts["timeouts"] += 1
                self._frame, self._synced = None, False
            self._write(self._frame if self._frame is not None else self._damping)
            return valid

    def _valid(self, reading: LowStateReading, received: float) -> bool:
        if not reading.crc_ok:
            self.counts["bad_crc"] += 1
            return False
        last = self._last_tick
        if last is not None and reading.tick <= last:
            far_back = last - reading.tick >= TICK_RESTART
            if not (far_back and self.state == WAITING):  # before arming, a restarted robot is followed
                if far_back and self.state == ARMED:
                    self._latch(
                        f"the robot's tick went back from {last} to {reading.tick}: it restarted, or a "
                        "second source publishes rt/lowstate; restart the bridge"
                    )
                self.counts["stale_tick"] += 1
                return False
        self._last_tick = reading.tick
        self._measured, self._measured_at = reading.position, received
        self.counts["states"] += 1
        return True

    def _run_preflight(self, now: float) -> None:
        if now - self._window[0][0] < 0.9 * PREFLIGHT_WINDOW_S:
            self.failures = ["collecting the first second of lowstate"]
            return
        writers = self._writers if self._writers is not None else []
        failures = preflight(
            list(self._window), PREFLIGHT_WINDOW_S, self.low_level.profile, writers, self._state_writers
        )
        if self._writers is None:
            failures.append("rt/lowcmd writers not known yet (DDS discovery takes about a second)")
        self.failures = failures
        if not failures:
            # No state was published before this: the supervisor's first command is built on one
            # published from now on, so it starts where the robot is (checked all the same).
            self.state, self._synced = ARMED, False

    def command(self, targets: JointTargets, now: float) -> str:
        """Write the frame for the supervisor's command; "" when written, else why not."""
        with self._lock:
            if self.state != ARMED:
                self.counts["refused_waiting"] += 1
                return (
                    "preflight has not passed: " + "; ".join(self.failures)
                    if self.state == WAITING
                    else f"{self.state}: " + "; ".join(self.failures)
                )
            if not self._synced:
                problem = self._resync_problem(targets, now)
                if problem:
                    self.counts["refused_far"] += 1
                    return problem
                self._synced = True
            self._frame = self.low_level.command_frame(targets)
            self._last_command = now
            self.counts["forwarded"] += 1
            self._write(self._frame)
            return ""

    def _resync_problem(self, targets: JointTargets, now: float) -> str:
        if self._measured is None or now - self._measured_at > MEASUREMENT_FRESH_S:
            return "no fresh joint measurement to check the command against: damping"
        far = np.abs(np.asarray(targets.position, dtype=float) - self._measured)
        if np.all(far <= RESYNC_TOLERANCE):  # a NaN is never near
            return ""
        worst = int(np.nanargmax(np.where(np.isnan(far), np.inf, far)))
        return (
            f"targets {far[worst]:.2f} rad from the measured joints ({self.low_level.profile.joint_names[worst]}), "
            f"over {RESYNC_TOLERANCE} rad after arming or a command timeout: damping until the supervisor "
            "commands from where the robot is (damp and reset it)"
        )

    def timed_out(self, now: float) -> bool:
        """Write the damping frame at once when commands stopped (between LowStates); True if so."""
        with self._lock:
            if self.state == ARMED and self._frame is not None and now - self._last_command > self.command_timeout:
                self._frame, self._synced = None, False
                self.counts["timeouts"] += 1
                self._write(self._damping)
                return True
        return False

    def shutdown(self, pause: Callable[[], None] = lambda: None) -> None:
        """The bridge stops: a robot it may have commanded is left damped (SHUTDOWN_FRAMES frames,
        ``pause()`` between them); one it never armed for gets nothing."""
        with self._lock:
            if self.state == WAITING:
                self.state, self.failures = STOPPED, ["the bridge stopped before preflight passed"]
                return
            self._latch("the bridge is stopping")
            for _ in range(SHUTDOWN_FRAMES):
                self._write(self._damping)
                pause()

    def _latch(self, reason: str) -> str:
        self.state, self.failures, self._frame = LATCHED, [reason], None
        self._write(self._damping)
        return reason
