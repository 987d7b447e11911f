"""A scripted joint trajectory (hold, then move) and how well the robot tracked it.

Used by the demo and the tests before a trained policy exists: it exercises the
whole command path (commander -> /joint_commands -> robot -> /joint_states) and
turns it into figures a person can check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PoseScript:
    """Hold ``default`` for ``hold`` seconds, then swing every joint sinusoidally for
    ``move`` seconds around it, then hold again for ``settle`` seconds."""

    default: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    hold: float = 3.0
    move: float = 6.0
    settle: float = 1.0
    amplitude: float = 0.2  # rad, further limited to half the room to the nearer joint limit
    frequency: float = 0.5  # Hz

    def __post_init__(self):
        room = np.minimum(self.upper - self.default, self.default - self.lower)
        self.amplitudes = np.minimum(self.amplitude, 0.5 * room)

    @property
    def duration(self) -> float:
        return self.hold + self.move + self.settle

    def phase(self, t: float) -> str:
        if t < self.hold:
            return "hold"
        if t < self.hold + self.move:
            return "move"
        return "settle" if t < self.duration else "done"

    def target(self, t: float) -> np.ndarray:
        if self.phase(t) != "move":
            return self.default.copy()
        return self.default + self.amplitudes * np.sin(2 * np.pi * self.frequency * (t - self.hold))


@dataclass
class TrackingReport:
    """Accumulates measured-vs-target joint positions and the timing of the state stream."""

    sensing_period: float
    errors: dict[str, list[float]] = field(default_factory=lambda: {"hold": [], "move": [], "settle": []})
    stamps: list[float] = field(default_factory=list)
    measured: list[np.ndarray] = field(default_factory=list)
    targets: list[np.ndarray] = field(default_factory=list)

    def add(self, phase: str, stamp: float, measured: np.ndarray, target: np.ndarray) -> None:
        self.stamps.append(stamp)
        self.measured.append(measured)
        self.targets.append(target)
        if phase in self.errors:
            self.errors[phase].append(float(np.max(np.abs(measured - target))))

    def save_series(self, path, joint_names) -> None:
        """Time series for plots: t (s from the first state), target and measured (rad)."""
        stamps = np.asarray(self.stamps)
        np.savez_compressed(
            path,
            t=stamps - stamps[0],
            target=np.asarray(self.targets),
            measured=np.asarray(self.measured),
            joint_names=np.asarray(joint_names),
        )

    def summary(self) -> dict[str, float]:
        stamps = np.asarray(self.stamps)
        gaps = np.diff(stamps) if stamps.size > 1 else np.zeros(1)
        span = float(stamps[-1] - stamps[0]) if stamps.size > 1 else 0.0
        result = {
            "joint_states_received": int(stamps.size),
            "joint_states_rate_hz": (stamps.size - 1) / span if span > 0 else 0.0,
            "joint_states_gaps_over_1.5_periods": int(np.sum(gaps > 1.5 * self.sensing_period)),
        }
        for phase, values in self.errors.items():
            if values:
                arr = np.asarray(values)
                result[f"{phase}_max_error_rad"] = float(arr.max())
                result[f"{phase}_rms_error_rad"] = float(np.sqrt(np.mean(arr**2)))
        return result
