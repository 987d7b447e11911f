"""Adaptive domain randomization: the randomization ranges follow the policy's performance.

Two rules, one protocol, so a training loop can hold either::

    conditions, probe = adr.sample(rng)      # per episode
    ...run the episode...
    adr.record(probe, success)               # per episode (success in [0, 1], or a return)
    decision = adr.update(mean_return)       # per training iteration
    adr.randomization, adr.history           # current ranges; ranges per iteration

:class:`AdaptiveRandomization` widens or narrows every range at once from the mean
return of an iteration. :class:`BoundaryAdaptiveRandomization` evaluates each boundary
of each range separately, after OpenAI et al., "Solving Rubik's Cube with a Robot Hand"
(2019), section on automatic domain randomization. Both leave constants alone, and
never move a range outside its parameter's hard ``bounds``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from sim2real.sim.randomization import Randomization

Ranges = dict[str, tuple[float, float]]
Probe = tuple[str, str]
SIDES = ("low", "high")


def _finite(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return number


def _adaptable(randomization: Randomization, parameters: Iterable[str] | None) -> list[str]:
    """Names to adapt, in the randomization's order; constants are fixed by intent."""
    names = [n for n, d in randomization.parameters.items() if d.kind != "constant"]
    if parameters is None:
        return names
    chosen = list(parameters)
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise ValueError(
            f"cannot adapt {unknown}: not a non-constant parameter of {randomization.name!r} (adaptable: {names})"
        )
    return [n for n in names if n in chosen]


def _ranges_to_json(ranges: Mapping[str, tuple[float, float]]) -> dict[str, list[float]]:
    return {name: [low, high] for name, (low, high) in ranges.items()}


def _ranges_from_json(data: Mapping[str, Any]) -> Ranges:
    return {name: (float(low), float(high)) for name, (low, high) in data.items()}


class _Adaptive:
    """What both rules share: the current randomization and its history."""

    KIND = ""

    def __init__(self, randomization: Randomization, parameters: Iterable[str] | None):
        self._randomization = randomization
        self.parameters = _adaptable(randomization, parameters)
        # history[0] is the starting point; update() appends one entry per iteration.
        self.history: list[Ranges] = [randomization.ranges()]
        self.decisions: list[str] = []

    @property
    def randomization(self) -> Randomization:
        return self._randomization

    def _base_state(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "randomization": self._randomization.to_dict(),
            "history": [_ranges_to_json(r) for r in self.history],
            "decisions": list(self.decisions),
        }

    def _load_base_state(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.KIND:
            raise ValueError(
                f"state of a {state.get('kind')!r} adaptive randomization cannot be loaded into a {self.KIND!r} one"
            )
        restored = Randomization.from_dict(state["randomization"], source=self._randomization.source)
        missing = [n for n in self.parameters if n not in restored.parameters]
        if missing:
            raise ValueError(f"saved randomization lacks the adapted parameters {missing}")
        self._randomization = restored
        self.history = [_ranges_from_json(r) for r in state["history"]]
        self.decisions = list(state["decisions"])


class AdaptiveRandomization(_Adaptive):
    """Widen or narrow every range together from an iteration's mean return.

    Let ``m = |target_return|`` (so a negative target still has a positive margin):

    - ``mean_return > target + widen_above * m``: widen, ``high += rate*|high|``,
      ``low -= rate/2*|low|`` (for the non-negative conditions we randomize this is
      high *= 1+rate, low *= 1-rate/2);
    - ``mean_return < target - narrow_below * m``: narrow, ``high -= rate/2*|high|``,
      ``low += rate*|low|``; if the two would cross, the range collapses onto its
      previous centre, so narrowing never leaves the previous range;
    - otherwise hold.

    Every range is then clipped to its parameter's bounds. Being multiplicative, the rule
    cannot move a boundary that sits at 0 (latency's low stays 0) and cannot open a range
    of zero width at 0.
    """

    KIND = "threshold"

    def __init__(
        self,
        randomization: Randomization,
        target_return: float,
        rate: float = 0.1,
        widen_above: float = 0.10,
        narrow_below: float = 0.20,
        parameters: Iterable[str] | None = None,
    ):
        super().__init__(randomization, parameters)
        self.target_return = _finite(target_return, "target_return")
        self.rate = _finite(rate, "rate")
        if not 0 < self.rate < 1:
            raise ValueError(f"rate must be in (0, 1), got {rate}")
        self.widen_above = _finite(widen_above, "widen_above")
        self.narrow_below = _finite(narrow_below, "narrow_below")
        if self.widen_above < 0 or self.narrow_below < 0:
            raise ValueError("widen_above and narrow_below are fractions of |target_return| and must be >= 0")

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, float], None]:
        return self._randomization.sample(rng), None

    def record(self, probe: Probe | None, success: float) -> None:
        """Nothing to record per episode: this rule only looks at :meth:`update`'s return."""
        if probe is not None:
            raise ValueError(f"AdaptiveRandomization never hands out probes, got {probe!r}")

    def decide(self, mean_return: float) -> str:
        mean_return = _finite(mean_return, "mean_return")
        margin = abs(self.target_return)
        if mean_return > self.target_return + self.widen_above * margin:
            return "widen"
        if mean_return < self.target_return - self.narrow_below * margin:
            return "narrow"
        return "hold"

    def update(self, mean_return: float) -> str:
        decision = self.decide(mean_return)
        if decision != "hold":
            current = self._randomization.ranges()
            new = {name: self._moved(*current[name], decision) for name in self.parameters}
            self._randomization = self._randomization.with_ranges(new)
        self.decisions.append(decision)
        self.history.append(self._randomization.ranges())
        return decision

    def _moved(self, low: float, high: float, decision: str) -> tuple[float, float]:
        r = self.rate
        if decision == "widen":
            return low - r / 2 * abs(low), high + r * abs(high)
        new_low, new_high = low + r * abs(low), high - r / 2 * abs(high)
        if new_low > new_high:
            centre = (low + high) / 2
            return centre, centre
        return new_low, new_high

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state for checkpoints (the settings are the constructor's)."""
        return self._base_state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._load_base_state(state)


class BoundaryAdaptiveRandomization(_Adaptive):
    """Per-boundary automatic domain randomization.

    Per episode, with probability ``probe_probability`` one adaptable parameter (chosen
    uniformly) is set exactly at one of its two current boundaries (chosen uniformly),
    the others being sampled as usual; :meth:`sample` returns that ``(parameter, side)``
    as the probe. :meth:`record` files the episode's success under its probe. When a
    boundary's buffer holds ``buffer_size`` results, their mean decides and the buffer
    is emptied: ``>= t_high`` moves the boundary outward by one step (the policy copes
    at the edge: make it harder), ``<= t_low`` moves it inward, otherwise it stays.

    A step is ``step_fraction`` of the parameter's initial range width, in log space for
    a loguniform parameter (``steps`` overrides per parameter, log units for loguniform).
    Boundaries never leave the bounds and, as in OpenAI's ADR, never cross the initial
    range's centre (the nominal value stays in the training distribution).
    """

    KIND = "boundary"

    def __init__(
        self,
        randomization: Randomization,
        probe_probability: float = 0.5,
        buffer_size: int = 20,
        t_low: float = 0.5,
        t_high: float = 0.8,
        step_fraction: float = 0.1,
        steps: Mapping[str, float] | None = None,
        parameters: Iterable[str] | None = None,
    ):
        super().__init__(randomization, parameters)
        self.probe_probability = _finite(probe_probability, "probe_probability")
        if not 0 <= self.probe_probability <= 1:
            raise ValueError(f"probe_probability must be in [0, 1], got {probe_probability}")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, (int, np.integer)) or buffer_size < 1:
            raise ValueError(f"buffer_size must be an integer >= 1, got {buffer_size!r}")
        self.buffer_size = int(buffer_size)
        self.t_low, self.t_high = _finite(t_low, "t_low"), _finite(t_high, "t_high")
        if self.t_low >= self.t_high:
            raise ValueError(f"t_low ({t_low}) must be below t_high ({t_high})")
        fraction = _finite(step_fraction, "step_fraction")
        if fraction <= 0:
            raise ValueError(f"step_fraction must be > 0, got {step_fraction}")
        steps = dict(steps or {})
        unknown = [n for n in steps if n not in self.parameters]
        if unknown:
            raise ValueError(f"steps given for {unknown}, which are not adapted (adapted: {self.parameters})")
        self._log = {n: randomization.parameters[n].kind == "loguniform" for n in self.parameters}
        self.steps: dict[str, float] = {}
        self.nominal: dict[str, float] = {}
        for name in self.parameters:
            low, high = (self._to_space(name, v) for v in randomization.parameters[name].range())
            self.nominal[name] = self._from_space(name, (low + high) / 2)
            step = steps.get(name, fraction * (high - low))
            if not (math.isfinite(step) and step > 0):
                raise ValueError(
                    f"step of {name!r} must be > 0 (its initial range has zero width: give it in steps={{...}})"
                )
            self.steps[name] = float(step)
        self.buffers: dict[Probe, list[float]] = {(n, s): [] for n in self.parameters for s in SIDES}
        # Boundary moves since the start: dicts of parameter, side, direction, value, mean.
        self.moves: list[dict[str, Any]] = []
        self._moves_at_last_update = 0

    def _to_space(self, name: str, value: float) -> float:
        return math.log(value) if self._log[name] else value

    def _from_space(self, name: str, value: float) -> float:
        return math.exp(value) if self._log[name] else value

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, float], Probe | None]:
        probe = None
        if self.parameters and rng.random() < self.probe_probability:
            probe = (self.parameters[int(rng.integers(len(self.parameters)))], SIDES[int(rng.integers(2))])
        conditions = self._randomization.sample(rng)
        if probe is not None:
            name, side = probe
            conditions[name] = self._randomization.parameters[name].range()[SIDES.index(side)]
        return conditions, probe

    def record(self, probe: Probe | None, success: float) -> None:
        if probe is None:
            return
        probe = (probe[0], probe[1])
        if probe not in self.buffers:
            raise ValueError(
                f"unknown probe {probe!r}; probes are (parameter, 'low'|'high') with parameter in {self.parameters}"
            )
        buffer = self.buffers[probe]
        buffer.append(_finite(success, "success"))
        if len(buffer) < self.buffer_size:
            return
        mean = sum(buffer) / len(buffer)
        buffer.clear()
        if mean >= self.t_high:
            self._move(probe, "outward", mean)
        elif mean <= self.t_low:
            self._move(probe, "inward", mean)

    def _move(self, probe: Probe, direction: str, mean: float) -> None:
        name, side = probe
        low, high = (self._to_space(name, v) for v in self._randomization.parameters[name].range())
        nominal = self._to_space(name, self.nominal[name])
        step = self.steps[name]
        outward = direction == "outward"
        if side == "low":
            low = low - step if outward else min(low + step, nominal)
        else:
            high = high + step if outward else max(high - step, nominal)
        before = self._randomization.parameters[name].range()
        self._randomization = self._randomization.with_ranges(
            {name: (self._from_space(name, low), self._from_space(name, high))}
        )
        after = self._randomization.parameters[name].range()
        if after != before:
            self.moves.append(
                {
                    "parameter": name,
                    "side": side,
                    "direction": direction,
                    "value": after[SIDES.index(side)],
                    "mean_success": mean,
                }
            )

    def update(self, mean_return: float | None = None) -> str:
        """Close a training iteration: log the ranges. Returns what the boundaries did since
        the last call: "widen" (only outward), "narrow" (only inward), "mixed" or "hold".
        ``mean_return`` is accepted for the common protocol and not used."""
        directions = {m["direction"] for m in self.moves[self._moves_at_last_update :]}
        self._moves_at_last_update = len(self.moves)
        decision = (
            "hold"
            if not directions
            else "mixed"
            if len(directions) == 2
            else "widen"
            if "outward" in directions
            else "narrow"
        )
        self.decisions.append(decision)
        self.history.append(self._randomization.ranges())
        return decision

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state for checkpoints (the settings are the constructor's,
        except the nominal centres and steps, which belong to the run's first ranges)."""
        state = self._base_state()
        state.update(
            nominal=dict(self.nominal),
            steps=dict(self.steps),
            buffers=[[name, side, list(values)] for (name, side), values in self.buffers.items()],
            moves=[dict(m) for m in self.moves],
            moves_at_last_update=self._moves_at_last_update,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._load_base_state(state)
        self.nominal = {n: float(v) for n, v in state["nominal"].items()}
        self.steps = {n: float(v) for n, v in state["steps"].items()}
        self.buffers = {(n, s): [] for n in self.parameters for s in SIDES}
        for name, side, values in state["buffers"]:
            if (name, side) in self.buffers:
                self.buffers[(name, side)] = [float(v) for v in values]
        self.moves = [dict(m) for m in state["moves"]]
        self._moves_at_last_update = int(state["moves_at_last_update"])
