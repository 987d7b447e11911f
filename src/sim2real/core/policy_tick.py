"""One policy tick, timed: the robot's newest inputs -> observation -> onnxruntime -> joint targets.

:meth:`PolicyRuntime.tick` takes the signals from :class:`RobotInputs`, refuses to
compute while any running policy lacks an input (and keeps the reason for the
operator), and otherwise asks the :class:`PolicySlot` for the joint targets. The node
publishes them and reports back with :meth:`PolicyRuntime.published`, so the latency
recorded here is the whole path the robot waits for: from the moment the observation
came in to the moment the command went out.

Statistics are over a rolling window (the last minute at 50 Hz), not since start-up:
diagnostics on a robot that has run for a day should describe the last minute.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from sim2real.core.policy_slot import PolicySlot
from sim2real.core.robot_inputs import RobotInputs, missing_inputs

WINDOW_TICKS = 3000
STALE = (
    "/joint_states arrive more than one policy period old (a backlog, or the driver's clock differs "
    "from this computer's)"
)


@dataclass
class Tick:
    targets: Optional[np.ndarray]  # None: waiting (see ``waiting``)
    waiting: str = ""
    inference_s: float = 0.0  # onnxruntime time of every policy run this tick (two while cross-fading)


class RollingStats:
    """p50/p99/max of the last ``window`` samples; safe to summarize from another thread."""

    def __init__(self, window: int = WINDOW_TICKS):
        self._samples: collections.deque[float] = collections.deque(maxlen=window)
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._samples.append(value)

    def summary_ms(self, prefix: str) -> dict[str, float]:
        with self._lock:
            samples = np.array(self._samples)
        if samples.size == 0:
            return {}
        p50, p99 = np.percentile(samples, (50, 99)) * 1e3
        return {
            f"{prefix}_p50_ms": float(p50),
            f"{prefix}_p99_ms": float(p99),
            f"{prefix}_max_ms": float(samples.max() * 1e3),
        }


class PolicyRuntime:
    def __init__(self, slot: PolicySlot, inputs: RobotInputs, window: int = WINDOW_TICKS, latency_monitor=None):
        """``latency_monitor``: a :class:`sim2real.core.latency.LatencyMonitor` that may predict each
        observation forward by the measured latency (None: observations as measured)."""
        self.slot = slot
        self.latency_monitor = latency_monitor
        self.inputs = inputs
        self.period = slot.profile.policy_period
        self.latency = RollingStats(window)
        self.inference = RollingStats(window)
        self.ticks = 0
        self.late = 0  # command out more than one period after its observation came in
        self.skipped = 0  # tick boundaries without a command (waiting, stalls)
        self.non_finite = 0  # ticks whose targets held NaN/inf (the supervisor holds on them)
        self.stale = 0  # observations older than one period on arrival, not computed on
        self.waiting = "no /joint_states received"
        self._last_stamp_ns: Optional[int] = None

    def tick(self, now: float, stamp_ns: Optional[int] = None, age: Optional[float] = None) -> Tick:
        """``now``: node time (s), for input freshness; ``stamp_ns``: the tick's observation
        stamp, to count skipped boundaries; ``age``: how old the observation was on arrival
        (s; None where time is the stamp itself, as in lockstep)."""
        if age is not None and age > self.period:
            # A backlog (or a driver clock off this computer's): a command computed on it would be
            # superseded by the next state's before it mattered, and only delay the fresh one.
            self.stale += 1
            self.waiting = STALE
            return Tick(None, STALE)
        signals = self.inputs.signals(now)
        missing = [reason for running in self.slot.running for reason in missing_inputs(running.spec, signals)]
        if missing:
            self.waiting = "; ".join(dict.fromkeys(missing))
            return Tick(None, self.waiting)
        self.waiting = ""
        if self.latency_monitor is not None and stamp_ns is not None:
            signals = self.latency_monitor.compensate(signals, stamp_ns * 1e-9)
        targets = self.slot.tick(signals)
        inference = self.slot.inference_s
        self.inference.add(inference)
        self.ticks += 1
        if not np.all(np.isfinite(targets)):
            self.non_finite += 1
        if stamp_ns is not None:
            if self._last_stamp_ns is not None:
                boundaries = round((stamp_ns - self._last_stamp_ns) / (self.period * 1e9))
                self.skipped += max(0, boundaries - 1)
            self._last_stamp_ns = stamp_ns
        return Tick(targets, "", inference)

    def published(self, observation_in: float, command_out: float) -> None:
        """Both from ``time.perf_counter()``: when the tick's observation arrived, when its command left."""
        latency = command_out - observation_in
        self.latency.add(latency)
        if latency > self.period:
            self.late += 1

    def summary(self) -> dict[str, float | int | str]:
        return {
            "ticks": self.ticks,
            "ticks_late": self.late,
            "ticks_skipped": self.skipped,
            "stale_observations": self.stale,
            "non_finite_ticks": self.non_finite,
            **self.latency.summary_ms("tick_latency"),
            **self.inference.summary_ms("inference"),
        }
