"""Curricula: a task difficulty in [d_min, d_max] that changes over training.

What the difficulty means is up to the task (a terrain roughness scale, a command range,
a goal distance); a curriculum only decides the number. Every curriculum has the same
interface: ``difficulty``, ``update(iteration, success_rate) -> difficulty`` once per
training iteration (each kind reads the argument it needs), ``state_dict()`` /
``load_state_dict()`` for checkpoints. :func:`make_curriculum` builds one from a
training config's ``curriculum:`` mapping::

    curriculum: {kind: linear, d_min: 0.0, d_max: 1.0, total_iterations: 1000}
    curriculum: {kind: automatic, step: 0.05, raise_above: 0.8, lower_below: 0.5}
    curriculum: {kind: reverse, hard_fraction: 0.3}
    curriculum: {kind: none, difficulty: 1.0}

``d_min`` / ``d_max`` default to 0 / 1; ``total_iterations`` defaults to the run's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from sim2real.core.config_files import ConfigError


class CurriculumError(ConfigError):
    """A curriculum config that cannot be used, with the field and fix in the message."""


def _check_range(d_min: float, d_max: float) -> tuple[float, float]:
    d_min, d_max = float(d_min), float(d_max)
    if not (math.isfinite(d_min) and math.isfinite(d_max)) or d_min > d_max:
        raise ValueError(f"difficulty range [{d_min}, {d_max}] must be finite with d_min <= d_max")
    return d_min, d_max


def _check_iterations(total_iterations: int) -> int:
    if isinstance(total_iterations, bool) or not isinstance(total_iterations, int) or total_iterations < 1:
        raise ValueError(f"total_iterations must be an integer >= 1, got {total_iterations!r}")
    return total_iterations


class Curriculum:
    """Base class: a difficulty that :meth:`update` moves once per iteration."""

    KIND = ""

    def __init__(self, d_min: float, d_max: float, difficulty: float):
        self.d_min, self.d_max = _check_range(d_min, d_max)
        self._difficulty = float(difficulty)

    @property
    def difficulty(self) -> float:
        return self._difficulty

    def update(self, iteration: int, success_rate: float | None = None) -> float:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "difficulty": self._difficulty}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.KIND:
            raise ValueError(f"state of a {state.get('kind')!r} curriculum cannot be loaded into a {self.KIND!r} one")
        self._difficulty = float(state["difficulty"])


class ConstantCurriculum(Curriculum):
    """No curriculum: the same difficulty throughout."""

    KIND = "none"

    def __init__(self, difficulty: float = 1.0):
        super().__init__(difficulty, difficulty, difficulty)

    def update(self, iteration: int, success_rate: float | None = None) -> float:
        return self._difficulty


class _Scheduled(Curriculum):
    """A difficulty that is a function of the iteration only (so state is the iteration)."""

    def __init__(self, d_min: float, d_max: float, total_iterations: int):
        self.total_iterations = _check_iterations(total_iterations)
        self.iteration = 0
        super().__init__(d_min, d_max, d_min)
        self._difficulty = self.at(0)

    def at(self, iteration: int) -> float:
        raise NotImplementedError

    def update(self, iteration: int, success_rate: float | None = None) -> float:
        self.iteration = int(iteration)
        self._difficulty = self.at(self.iteration)
        return self._difficulty

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "iteration": self.iteration, "total_iterations": self.total_iterations}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.iteration = int(state["iteration"])
        # A resumed run keeps the line it was on: with total_iterations defaulting to the run's
        # length, `--resume ... --iterations 200` on a finished 100-iteration linear run would
        # otherwise stretch the line and drop the difficulty from d_max back to the middle.
        if state.get("total_iterations") is not None:
            self.total_iterations = _check_iterations(int(state["total_iterations"]))
        self._difficulty = self.at(self.iteration)


class LinearCurriculum(_Scheduled):
    """``d(t) = d_min + (t / T) (d_max - d_min)`` for t in [0, T], d_max after T, d_min before 0."""

    KIND = "linear"

    def at(self, iteration: int) -> float:
        if iteration >= self.total_iterations:  # exactly: d_min + 1.0 * (d_max - d_min) may round below d_max
            return self.d_max
        progress = max(iteration / self.total_iterations, 0.0)
        return self.d_min + progress * (self.d_max - self.d_min)


class ReverseCurriculum(_Scheduled):
    """Hardest first, then easier to consolidate. With ``t_h = hard_fraction * T``::

        d(t) = d_max                                          for t <= t_h
        d(t) = d_max - (t - t_h) / (T - t_h) * (d_max - d_min)  for t_h < t < T
        d(t) = d_min                                          for t >= T  (if t_h < T)

    With ``hard_fraction = 1`` it stays at d_max throughout.
    """

    KIND = "reverse"

    def __init__(self, d_min: float, d_max: float, total_iterations: int, hard_fraction: float = 0.5):
        self.hard_fraction = float(hard_fraction)
        if not 0 <= self.hard_fraction <= 1:
            raise ValueError(f"hard_fraction must be in [0, 1], got {hard_fraction!r}")
        super().__init__(d_min, d_max, total_iterations)

    def at(self, iteration: int) -> float:
        hard_until = self.hard_fraction * self.total_iterations
        if iteration <= hard_until or hard_until >= self.total_iterations:
            return self.d_max
        if iteration >= self.total_iterations:
            return self.d_min
        progress = (iteration - hard_until) / (self.total_iterations - hard_until)
        return self.d_max - progress * (self.d_max - self.d_min)


class AutomaticCurriculum(Curriculum):
    """Success-driven: ``update`` adds ``step`` when the success rate is above
    ``raise_above``, subtracts it when below ``lower_below``, holds otherwise (and when
    the success rate is None); always within [d_min, d_max]. Starts at ``start``
    (default d_min)."""

    KIND = "automatic"

    def __init__(
        self,
        d_min: float,
        d_max: float,
        step: float,
        raise_above: float,
        lower_below: float,
        start: float | None = None,
    ):
        d_min, d_max = _check_range(d_min, d_max)
        start = d_min if start is None else float(start)
        if not d_min <= start <= d_max:
            raise ValueError(f"start {start} is outside [{d_min}, {d_max}]")
        super().__init__(d_min, d_max, start)
        self.step = float(step)
        if not (math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"step must be > 0, got {step!r}")
        self.raise_above, self.lower_below = float(raise_above), float(lower_below)
        if not self.lower_below <= self.raise_above:
            raise ValueError(f"lower_below ({lower_below}) must not exceed raise_above ({raise_above})")

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        # A warm start may bring a difficulty from a curriculum with another range.
        self._difficulty = min(max(self._difficulty, self.d_min), self.d_max)

    def update(self, iteration: int, success_rate: float | None = None) -> float:
        if success_rate is None:
            return self._difficulty
        if success_rate > self.raise_above:
            self._difficulty = min(self._difficulty + self.step, self.d_max)
        elif success_rate < self.lower_below:
            self._difficulty = max(self._difficulty - self.step, self.d_min)
        return self._difficulty


# kind -> (class, required fields, optional fields with defaults). total_iterations is
# filled from the run when the config leaves it out.
_KINDS: dict[str, tuple[type, tuple[str, ...], dict[str, Any]]] = {
    "linear": (LinearCurriculum, ("total_iterations",), {"d_min": 0.0, "d_max": 1.0}),
    "reverse": (ReverseCurriculum, ("total_iterations",), {"d_min": 0.0, "d_max": 1.0, "hard_fraction": 0.5}),
    "automatic": (
        AutomaticCurriculum,
        ("step", "raise_above", "lower_below"),
        {"d_min": 0.0, "d_max": 1.0, "start": None},
    ),
    "none": (ConstantCurriculum, (), {"difficulty": 1.0}),
}


def _curriculum_arguments(
    config: Mapping[str, Any],
    kind: str,
    required: tuple[str, ...],
    optional: Mapping[str, Any],
    total_iterations: int | None,
    source: str | Path,
    field: str,
) -> dict[str, Any]:
    """The keyword arguments of a ``kind`` curriculum: known fields only, the required ones
    present, numbers finite (an optional field may stay null where its default is)."""
    allowed = ("kind", *required, *optional)
    for key in config:
        if key not in allowed:
            raise CurriculumError(
                source,
                f"{field}.{key}",
                f"unknown field for a {kind!r} curriculum",
                f"remove it or use one of {list(allowed)}",
            )
    arguments = dict(optional)
    arguments.update({k: v for k, v in config.items() if k != "kind"})
    if "total_iterations" in required and "total_iterations" not in config and total_iterations is not None:
        arguments["total_iterations"] = total_iterations
    for key in required:
        if key not in arguments:
            raise CurriculumError(source, f"{field}.{key}", "missing", f"add '{key}:' for a {kind!r} curriculum")
    for key, value in arguments.items():
        if key == "total_iterations":
            continue
        if value is None and optional.get(key, ...) is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CurriculumError(
                source, f"{field}.{key}", f"expected a finite number, got {value!r}", "write a number"
            )
    return arguments


def make_curriculum(
    config: Mapping[str, Any] | None,
    total_iterations: int | None = None,
    source: str | Path = "<config>",
    field: str = "curriculum",
) -> Curriculum:
    """Build a curriculum from ``{kind: linear|automatic|reverse|none, ...}``.

    ``None`` (no curriculum section) is ``{kind: none}``. ``total_iterations`` is used
    when the mapping does not give one. Errors name ``source`` and ``field``.
    """
    if config is None:
        config = {"kind": "none"}
    if not isinstance(config, Mapping):
        raise CurriculumError(
            source,
            field,
            f"expected a mapping with 'kind:', got {config!r}",
            f"write {field}: {{kind: one of {list(_KINDS)}, ...}}",
        )
    kind = config.get("kind")
    if kind not in _KINDS:
        problem = "missing 'kind'" if kind is None else f"unknown kind {kind!r}"
        raise CurriculumError(source, f"{field}.kind", problem, f"use one of {list(_KINDS)}")
    cls, required, optional = _KINDS[kind]
    arguments = _curriculum_arguments(config, kind, required, optional, total_iterations, source, field)
    try:
        return cls(**arguments)
    except ValueError as exc:
        raise CurriculumError(source, field, str(exc), "correct the values") from None
