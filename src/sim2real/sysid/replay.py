"""Replay a recording's commands in a SimWorld, from the recorded state, under given conditions.

The replay mirrors what ``sim_robot`` (and a real driver) does: before each sensing
interval the newest command stamped at or before its start is handed to the actuator,
which delivers it ``latency`` later; the world then steps the interval's physics steps.
The replay runs on *windows* (a few seconds each) that each start from the measured
state, so an error early in the recording does not drown the rest of the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.world import SimWorld
from sim2real.sysid.dataset import Dataset, Segment

# Conditions that a replay sets explicitly; noise stays 0 (the simulated readings are compared
# with noisy measured ones, and noise would only add variance to the cost).
NOISELESS = {"joint_position_noise": 0.0, "joint_velocity_noise": 0.0, "gyro_noise": 0.0, "accelerometer_noise": 0.0}


@dataclass(frozen=True)
class Window:
    segment: int
    start: int  # index of the first state (the initial state)
    stop: int  # index past the last state compared

    def __len__(self) -> int:
        return self.stop - self.start


def windows(segments: list[Segment], length: float, begin: float, end: float, index: int | None = None) -> list[Window]:
    """Consecutive windows of ``length`` s covering the fraction [begin, end) of each segment's time."""
    result = []
    for k, seg in enumerate(segments):
        if index is not None and k != index:
            continue
        t0 = seg.t[0] + begin * seg.duration
        t1 = seg.t[0] + end * seg.duration
        start = t0
        while start + 0.5 * length <= t1:
            i0, i1 = np.searchsorted(seg.t, [start, min(start + length, t1)])
            if i1 - i0 > 2:
                result.append(Window(k, int(i0), int(i1)))
            start += length
    return result


class Replayer:
    """One noiseless SimWorld that replays windows of a dataset under candidate conditions."""

    def __init__(self, profile: RobotProfile, dataset: Dataset):
        """Recordings made on a stand (``dataset.suspended``) are replayed with the base held
        in the air as well."""
        self.profile = profile
        self.segments = segments = dataset.segments
        self.world = SimWorld(profile, PhysicalConditions(**NOISELESS), seed=0, suspended=dataset.suspended)
        self.physics = profile.physics_period
        # Per state: the newest command at its time, and the physics steps to the next state.
        self._newest = [np.searchsorted(seg.command_t, seg.t, side="right") - 1 for seg in segments]
        self._steps = [np.maximum(1, np.round(np.diff(seg.t) / self.physics).astype(int)) for seg in segments]

    def close(self) -> None:
        self.world.close()

    def compared(self, window: Window, stride: int) -> np.ndarray:
        """Indices of the states :meth:`run` returns for this window and stride."""
        return np.arange(window.start + stride, window.stop, stride)

    def run(
        self, window: Window, conditions: dict[str, float], stride: int = 1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Simulated (q, dq, motor effort) at the states :meth:`compared` lists (every
        ``stride``-th after the first)."""
        seg = self.segments[window.segment]
        newest, steps = self._newest[window.segment], self._steps[window.segment]
        world = self.world
        latency = float(conditions.get("latency", 0.0))
        world.set_conditions(**{**conditions, **NOISELESS, "latency": 0.0})
        i0 = window.start
        world.reset(seg.q[i0], joint_velocities=seg.dq[i0])
        # The command in force at the start is the one given `latency` before it: deliver it now
        # (latency 0 for one physics step), then restore the latency for everything later.
        given = seg.command_at(seg.t[i0] - latency)
        self._give(seg, given)
        world.step(1)
        world.set_conditions(latency=latency)
        indices = self.compared(window, stride)
        q_out = np.empty((len(indices), self.profile.num_joints))
        dq_out = np.empty_like(q_out)
        effort_out = np.empty_like(q_out)
        owed = -1  # the physics step already taken counts against the first interval
        k = 0
        for i in range(i0, indices[-1] if len(indices) else i0):
            if newest[i] > given:  # commands in flight at the start: the newest one is given now
                if owed > 0:
                    world.step(owed)
                    owed = 0
                given = int(newest[i])
                self._give(seg, given)
            owed += int(steps[i])
            if i + 1 == indices[k]:
                if owed > 0:
                    world.step(owed)
                owed = 0
                state = world.true_joint_state()
                q_out[k], dq_out[k], effort_out[k] = state
                k += 1
        return q_out, dq_out, effort_out

    def _give(self, seg: Segment, index: int) -> None:
        if index < 0:
            self.world.command(self.profile.default_positions)
        else:
            self.world.command(seg.command_q[index], seg.command_dq[index], seg.command_effort[index])
