"""Timing of a periodic loop: achieved rate, lateness and missed periods.

Used by every loop that promises a rate (sim_robot's sensing loop, later the policy
tick) so that "did we keep up?" is answered the same way everywhere; and
:class:`GapFreeStream`, for "has this input been steady for a while?".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PeriodStats:
    """Counts a period as missed when its work finished after the next period began."""

    period: float
    ticks: int = 0
    missed: int = 0
    lateness: list[float] = field(default_factory=list)
    max_samples: int = 100_000

    def record(self, deadline: float, finished: float) -> None:
        """``deadline``: when this tick was due; ``finished``: when its work was done."""
        self.ticks += 1
        late = finished - deadline
        if late > self.period:
            self.missed += 1
        if len(self.lateness) < self.max_samples:
            self.lateness.append(late)

    @property
    def missed_fraction(self) -> float:
        return self.missed / self.ticks if self.ticks else 0.0

    def summary(self) -> dict[str, float]:
        late = np.asarray(self.lateness) if self.lateness else np.zeros(1)
        return {
            "ticks": self.ticks,
            "missed": self.missed,
            "missed_fraction": self.missed_fraction,
            "lateness_p50_ms": float(np.percentile(late, 50) * 1e3),
            "lateness_p99_ms": float(np.percentile(late, 99) * 1e3),
            "lateness_max_ms": float(late.max() * 1e3),
        }


class GapFreeStream:
    """How long a message stream has run without a gap longer than ``max_gap`` seconds."""

    def __init__(self, max_gap: float):
        self.max_gap = max_gap
        self._last: float | None = None
        self._since: float | None = None

    def arrived(self, t: float) -> None:
        """A message arrived at ``t`` (one clock, non-decreasing)."""
        if self._last is None or t - self._last > self.max_gap:
            self._since = t
        self._last = t

    def steady_for(self) -> float:
        """Seconds from the start of the current gap-free run to its newest message (0: none yet)."""
        if self._since is None:
            return 0.0
        assert self._last is not None  # arrived() sets both
        return self._last - self._since
