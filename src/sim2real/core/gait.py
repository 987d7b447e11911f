"""The gait clock: a phase a walking policy is trained to step with, and fed back to it.

Walking from a standstill is the hardest thing for a velocity-tracking policy to learn:
standing still is a stable answer to every command, and a policy whose mean action stands
will stand even when its noisy training self walked. A clock in the observation (``gait_clock``
term: sin and cos of the phase) and a reward for feet that follow it (``gait_contact``, trot:
diagonal pairs half a cycle apart) give the policy a rhythm to step to from the first
iteration; walk-these-ways (Margolis and Agrawal, CoRL 2022) feeds the same clock.

The clock belongs to the policy, not to the robot: the training env and the deployed runtime
both advance a :class:`GaitClock` by the policy period at every policy step, at the
frequency the task config declares (``gait.frequency``, carried in the exported policy's
task config), starting from phase 0 when the policy starts.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


def gait_settings(task_config: Mapping[str, Any] | None, required: bool = False) -> dict[str, Any] | None:
    """The task's ``gait`` section (frequency in Hz, per-foot phase offsets, stance fraction),
    or None when the task has no gait clock; ValueError if ``required`` (something observes or
    rewards the clock) and there is none."""
    gait = (task_config or {}).get("gait")
    if not gait:
        if required:
            raise ValueError(
                "the gait clock (observation gait_clock, reward gait_contact) needs a gait section "
                "in the task config: gait: {frequency: Hz, offsets: [one per foot], stance: fraction}"
            )
        return None
    frequency = float(gait.get("frequency", 0.0))
    if not frequency > 0.0:
        raise ValueError(f"gait.frequency must be > 0 Hz, got {gait.get('frequency')!r}")
    return {
        "frequency": frequency,
        "offsets": [float(o) for o in gait.get("offsets", [])],
        "stance": float(gait.get("stance", 0.5)),
    }


class GaitClock:
    """Phase in cycles, advanced by ``period`` seconds at ``frequency`` Hz per :meth:`advance`."""

    def __init__(self, frequency: float, period: float, phase: float = 0.0):
        if not frequency > 0 or not period > 0:
            raise ValueError(f"gait clock needs frequency > 0 Hz and period > 0 s, got {frequency}, {period}")
        self.step = float(frequency) * float(period)
        self.phase = float(phase) % 1.0

    def advance(self) -> None:
        self.phase = (self.phase + self.step) % 1.0

    def stance(self, offsets: Sequence[float], stance_fraction: float) -> np.ndarray:
        """Which feet the gait wants on the ground now (bool per foot)."""
        return (self.phase + np.asarray(offsets, dtype=float)) % 1.0 < stance_fraction

    def swing_lift(self, offsets: Sequence[float], stance_fraction: float) -> np.ndarray:
        """Per foot, the fraction of the swing height it should be at now: 0 in stance, rising
        linearly to 1 at mid-swing and back to 0 at touchdown (walk-these-ways' foot-clearance
        target profile)."""
        if stance_fraction >= 1.0:
            return np.zeros(len(offsets))
        swing = ((self.phase + np.asarray(offsets, dtype=float)) % 1.0 - stance_fraction) / (1.0 - stance_fraction)
        return np.where(swing >= 0.0, 1.0 - np.abs(2.0 * swing - 1.0), 0.0)
