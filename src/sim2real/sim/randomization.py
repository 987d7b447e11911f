"""Domain randomization: per-episode distributions over the named physical conditions.

A randomization is a YAML file under ``config/randomization/`` (commented example:
``config/randomization/go2_reference.yaml``)::

    name: go2_reference                  # optional, defaults to the file name
    parameters:                          # keys are PhysicalConditions names, SI units
      ground_friction: {uniform: [0.3, 1.2], bounds: [0.05, 2.0]}
      mass_scale:      {loguniform: [0.8, 1.25]}
      motor_strength:  {normal: {mean: 1.0, std: 0.08}, bounds: [0.7, 1.3]}
      latency:         {constant: 0.01}
    pushes: {interval: [5.0, 10.0], force: [50.0, 100.0], duration: 0.15}   # or absent / null

Each parameter names exactly one distribution; ``bounds`` are the hard physical limits
that neither sampling nor adaptation (``sim2real.train.adaptive_dr``) may leave, and
default to the condition's valid range in :class:`PhysicalConditions`. A condition
that is not listed keeps whatever value the world already has.

:meth:`Randomization.to_dict` writes this same format (infinite bounds as null), so a
checkpoint's or an ONNX model's randomization can be saved back to YAML and reloaded.
Every problem found while loading is a :class:`RandomizationError` naming the file, the
field and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sim2real.core.config_files import ConfigError, available_configs, config_path, read_config
from sim2real.sim.conditions import PhysicalConditions

KINDS = ("uniform", "loguniform", "normal", "constant")
PUSH_FIELDS = ("interval", "force", "duration")
_EXAMPLE = "config/randomization/go2_reference.yaml"


class RandomizationError(ConfigError):
    """A randomization config that cannot be used, with the file, field and fix in the message."""


def physical_bounds(name: str) -> tuple[float, float]:
    """The valid range of a condition as closed bounds.

    An open lower end (mass_scale > 0) becomes the smallest positive float, so that
    clipping to the bounds always yields a value :meth:`PhysicalConditions.check` accepts.
    """
    meta = PhysicalConditions._metadata(name)
    low = math.nextafter(meta["low"], math.inf) if meta["low_open"] else float(meta["low"])
    return low, float(meta["high"])


@dataclass(frozen=True)
class Distribution:
    """One parameter's per-episode distribution, in SI units.

    uniform / loguniform: drawn from [``low``, ``high``] (``mean`` is the arithmetic /
    geometric centre, ``std`` 0). normal: drawn from N(``mean``, ``std``) and clipped to
    ``bounds``, which puts a small point mass on a bound the tail reaches; ``low``/``high``
    hold :meth:`range`. constant: ``low == high == mean``, ``std == 0``. Build one with
    the class methods, which fill the fields consistently.
    """

    kind: str
    low: float
    high: float
    mean: float
    std: float
    bounds: tuple[float, float]

    @classmethod
    def uniform(cls, low: float, high: float, bounds: tuple[float, float]) -> "Distribution":
        return cls("uniform", float(low), float(high), (low + high) / 2.0, 0.0, bounds)

    @classmethod
    def loguniform(cls, low: float, high: float, bounds: tuple[float, float]) -> "Distribution":
        return cls("loguniform", float(low), float(high), math.sqrt(low * high), 0.0, bounds)

    @classmethod
    def normal(cls, mean: float, std: float, bounds: tuple[float, float]) -> "Distribution":
        # low/high mirror range(), so every kind reads its adaptable interval the same way.
        low = max(mean - 2.0 * std, bounds[0])
        high = min(mean + 2.0 * std, bounds[1])
        return cls("normal", float(low), float(high), float(mean), float(std), bounds)

    @classmethod
    def constant(cls, value: float, bounds: tuple[float, float]) -> "Distribution":
        return cls("constant", float(value), float(value), float(value), 0.0, bounds)

    def sample(self, rng: np.random.Generator) -> float:
        if self.kind == "uniform":
            value = rng.uniform(self.low, self.high)
        elif self.kind == "loguniform":
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        elif self.kind == "normal":
            value = rng.normal(self.mean, self.std)
        else:
            value = self.mean
        # Also for uniform draws: exp/log round-off must not step past a bound by an ulp.
        return float(min(max(value, self.bounds[0]), self.bounds[1]))

    def range(self) -> tuple[float, float]:
        """The interval adaptation works on: [low, high]; for normal mean +- 2 std within bounds."""
        if self.kind == "normal":
            return (max(self.mean - 2.0 * self.std, self.bounds[0]), min(self.mean + 2.0 * self.std, self.bounds[1]))
        return self.low, self.high

    def with_range(self, low: float, high: float) -> "Distribution":
        """Same kind over a new interval, clipped to the bounds. A normal keeps its mean at
        the centre with std = width / 4, so that :meth:`range` gives the interval back."""
        low = min(max(float(low), self.bounds[0]), self.bounds[1])
        high = min(max(float(high), self.bounds[0]), self.bounds[1])
        if low > high:
            raise ValueError(f"range low {low:g} is above high {high:g}")
        if self.kind == "normal":
            return replace(self, low=low, high=high, mean=(low + high) / 2.0, std=(high - low) / 4.0)
        if self.kind == "constant":
            if low != high:
                raise ValueError(f"a constant cannot take the range [{low:g}, {high:g}]; declare it uniform")
            return replace(self, low=low, high=low, mean=low)
        if self.kind == "loguniform" and low <= 0:
            raise ValueError(f"a loguniform range needs low > 0, got {low:g}")
        mean = (low + high) / 2.0 if self.kind == "uniform" else math.sqrt(low * high)
        return replace(self, low=low, high=high, mean=mean)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "normal":
            spec: Any = {"mean": self.mean, "std": self.std}
        elif self.kind == "constant":
            spec = self.mean
        else:
            spec = [self.low, self.high]
        # JSON has no infinity; null reads back as "unbounded".
        bounds = [None if math.isinf(b) else b for b in self.bounds]
        return {self.kind: spec, "bounds": bounds}


@dataclass(frozen=True)
class PushSpec:
    """Random horizontal pushes on the base: one every ``interval`` s (uniform in the
    interval, drawn again after each push), of magnitude uniform in ``force`` N, in a
    uniformly random horizontal direction, lasting ``duration`` s."""

    interval: tuple[float, float]
    force: tuple[float, float]
    duration: float

    def sample_interval(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(*self.interval))

    def sample_force(self, rng: np.random.Generator) -> np.ndarray:
        """World-frame force (N), z = 0, for :meth:`SimWorld.apply_push`."""
        magnitude = rng.uniform(*self.force)
        heading = rng.uniform(0.0, 2.0 * math.pi)
        return np.array([magnitude * math.cos(heading), magnitude * math.sin(heading), 0.0])

    def to_dict(self) -> dict[str, Any]:
        return {"interval": list(self.interval), "force": list(self.force), "duration": self.duration}


@dataclass(frozen=True)
class Randomization:
    """A named set of per-parameter distributions plus optional pushes."""

    name: str
    parameters: dict[str, Distribution]
    pushes: PushSpec | None
    source: Path | None

    def sample(self, rng: np.random.Generator) -> dict[str, float]:
        """One episode's conditions, for ``SimWorld.set_conditions(**values)``.

        Draws only from ``rng``, in the fixed order of :meth:`PhysicalConditions.names`,
        so a seeded caller gets the same sequence whatever order the YAML listed.
        """
        return {
            name: self.parameters[name].sample(rng) for name in PhysicalConditions.names() if name in self.parameters
        }

    def ranges(self) -> dict[str, tuple[float, float]]:
        return {name: dist.range() for name, dist in self.parameters.items()}

    def with_ranges(self, ranges: Mapping[str, tuple[float, float]]) -> "Randomization":
        """A new randomization with some parameters moved to new ranges (clipped to bounds);
        the others, and the pushes, unchanged."""
        parameters = dict(self.parameters)
        for name, (low, high) in ranges.items():
            if name not in parameters:
                raise ValueError(
                    f"with_ranges: {name!r} is not randomized by {self.name!r} (its parameters: {sorted(parameters)})"
                )
            try:
                parameters[name] = parameters[name].with_range(low, high)
            except ValueError as exc:
                raise ValueError(f"with_ranges: {name}: {exc}") from None
        return replace(self, parameters=parameters)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable, in the YAML format; :meth:`from_dict` reads it back."""
        return {
            "name": self.name,
            "parameters": {
                name: self.parameters[name].to_dict() for name in PhysicalConditions.names() if name in self.parameters
            },
            "pushes": None if self.pushes is None else self.pushes.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any, source: str | Path | None = None) -> "Randomization":
        """Validate a mapping in the YAML format. Errors name ``source`` (or ``<dict>``)."""
        return _Reader(source if source is not None else "<dict>", data, source).read()


NOMINAL = Randomization("nominal", {}, None, None)


def randomization_path(name_or_path: str | Path) -> Path:
    """``go2_reference`` -> ``<share>/config/randomization/go2_reference.yaml``; a path stays."""
    return config_path("randomization", name_or_path)


def available_randomizations() -> list[str]:
    return available_configs("randomization")


def load_randomization(name_or_path: str | Path) -> Randomization:
    """Load and validate a randomization by name (``go2_reference``) or by path."""
    path, data = read_config("randomization", name_or_path, RandomizationError, "randomization")
    return _Reader(path, data, path).read()


class _Reader:
    """Reads one randomization mapping field by field, so each error can name its field."""

    def __init__(self, where: str | Path, data: Any, source: str | Path | None):
        self.where = where
        self.data = data
        self.source = Path(source) if source is not None else None

    def fail(self, field: str, problem: str, fix: str) -> RandomizationError:
        return RandomizationError(self.where, field, problem, fix)

    def read(self) -> Randomization:
        data = self.data
        if not isinstance(data, dict):
            raise self.fail(
                "(file)",
                f"expected a mapping with 'parameters:', got {type(data).__name__}",
                f"write 'parameters:' (and optionally 'name:', 'pushes:'), see {_EXAMPLE}",
            )
        self._no_unknown(data, ("name", "parameters", "pushes"), "")
        name = data.get("name", self.source.stem if self.source is not None else "randomization")
        if not isinstance(name, str) or not name:
            raise self.fail("name", f"expected a non-empty string, got {name!r}", "write name: <text>")
        parameters = data.get("parameters")
        if parameters is None:
            parameters = {}
        if not isinstance(parameters, dict):
            raise self.fail(
                "parameters",
                f"expected a mapping of condition names, got {parameters!r}",
                "write one 'name: {uniform: [low, high]}' entry per line, or 'parameters: {}'",
            )
        distributions = {}
        for key, entry in parameters.items():
            if key not in PhysicalConditions.names():
                raise self.fail(
                    f"parameters.{key}", "unknown physical condition", f"use one of {list(PhysicalConditions.names())}"
                )
            distributions[key] = self._parameter(key, entry)
        pushes = self._pushes(data.get("pushes"))
        return Randomization(name, distributions, pushes, self.source)

    def _no_unknown(self, mapping: dict, allowed: tuple[str, ...], prefix: str) -> None:
        for key in mapping:
            if key not in allowed:
                raise self.fail(f"{prefix}{key}", "unknown field", f"remove it or use one of {list(allowed)}")

    def _number(self, value: Any, field: str, fix: str = "write a finite number in SI units") -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(field, f"expected a finite number, got {value!r}", fix)
        return float(value)

    def _pair(self, value: Any, field: str, what: str) -> tuple[float, float]:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise self.fail(field, f"expected [low, high], got {value!r}", f"write [low, high] in {what}")
        low = self._number(value[0], field, f"write [low, high] as numbers in {what}")
        high = self._number(value[1], field, f"write [low, high] as numbers in {what}")
        if low > high:
            raise self.fail(field, f"low {low:g} is above high {high:g}", "swap the two numbers")
        return low, high

    def _bounds(self, name: str, entry: dict) -> tuple[float, float]:
        field = f"parameters.{name}.bounds"
        valid = physical_bounds(name)
        value = entry.get("bounds")
        if value is None:
            return valid
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise self.fail(field, f"expected [min, max], got {value!r}", "write bounds: [min, max] (null = unbounded)")
        ends = []
        for end, unbounded, default in zip(value, (-math.inf, math.inf), valid):
            if end is None or end == unbounded:
                ends.append(default)
                continue
            number = self._number(end, field, "write bounds: [min, max] as numbers (null = unbounded)")
            try:
                PhysicalConditions.check(name, number)
            except ValueError:
                raise self.fail(
                    field,
                    f"{number:g} is outside the physically valid range "
                    f"{PhysicalConditions.valid_range(name)} of {name}",
                    "choose bounds inside the valid range",
                ) from None
            ends.append(number)
        if ends[0] > ends[1]:
            raise self.fail(field, f"min {ends[0]:g} is above max {ends[1]:g}", "swap the two numbers")
        return ends[0], ends[1]

    def _parameter(self, name: str, entry: Any) -> Distribution:
        field = f"parameters.{name}"
        if not isinstance(entry, dict):
            raise self.fail(
                field,
                f"expected a mapping like {{uniform: [low, high]}}, got {entry!r}",
                f"write one of {list(KINDS)} (and optionally bounds: [min, max])",
            )
        self._no_unknown(entry, (*KINDS, "bounds"), f"{field}.")
        kinds = [k for k in KINDS if k in entry]
        if len(kinds) != 1:
            problem = "no distribution given" if not kinds else f"several distributions given ({kinds})"
            raise self.fail(field, problem, f"give exactly one of {list(KINDS)}")
        kind = kinds[0]
        bounds = self._bounds(name, entry)
        field = f"{field}.{kind}"
        spec = entry[kind]
        if kind in ("uniform", "loguniform"):
            low, high = self._pair(spec, field, "the condition's SI units")
            if kind == "loguniform" and low <= 0:
                raise self.fail(
                    field,
                    f"low must be > 0 for a loguniform, got {low:g}",
                    "use a positive low, or a uniform distribution",
                )
            self._inside(field, (low, high), bounds)
            return (
                Distribution.uniform(low, high, bounds)
                if kind == "uniform"
                else Distribution.loguniform(low, high, bounds)
            )
        if kind == "normal":
            if not isinstance(spec, dict):
                raise self.fail(field, f"expected {{mean: m, std: s}}, got {spec!r}", "write normal: {mean: m, std: s}")
            self._no_unknown(spec, ("mean", "std"), f"{field}.")
            for key in ("mean", "std"):
                if key not in spec:
                    raise self.fail(f"{field}.{key}", "missing", "write normal: {mean: m, std: s}")
            mean = self._number(spec["mean"], f"{field}.mean")
            std = self._number(spec["std"], f"{field}.std")
            if std < 0:
                raise self.fail(f"{field}.std", f"must be >= 0, got {std:g}", "use a std >= 0, or constant: value")
            # std 0 is what adaptive randomization writes when it narrows a range to its centre.
            self._inside(f"{field}.mean", (mean, mean), bounds)
            return Distribution.normal(mean, std, bounds)
        value = self._number(spec, field)
        self._inside(field, (value, value), bounds)
        return Distribution.constant(value, bounds)

    def _inside(self, field: str, interval: tuple[float, float], bounds: tuple[float, float]) -> None:
        if interval[0] < bounds[0] or interval[1] > bounds[1]:
            shown = f"{interval[0]:g}" if interval[0] == interval[1] else f"[{interval[0]:g}, {interval[1]:g}]"
            raise self.fail(
                field,
                f"{shown} is outside the bounds [{bounds[0]:g}, {bounds[1]:g}]",
                "narrow the distribution, or widen 'bounds:' (within the physically valid range)",
            )

    def _pushes(self, spec: Any) -> PushSpec | None:
        if spec is None:
            return None
        form = "write pushes: {interval: [lo, hi], force: [lo, hi], duration: s}"
        if not isinstance(spec, dict):
            raise self.fail("pushes", f"expected a mapping, got {spec!r}", f"{form}, or leave it out")
        self._no_unknown(spec, PUSH_FIELDS, "pushes.")
        for key in PUSH_FIELDS:
            if key not in spec:
                raise self.fail(f"pushes.{key}", "missing", form)
        interval = self._pair(spec["interval"], "pushes.interval", "s between pushes")
        if interval[0] <= 0:
            raise self.fail("pushes.interval", f"must be > 0 s, got {interval[0]:g}", "use a positive interval")
        force = self._pair(spec["force"], "pushes.force", "N")
        if force[0] < 0:
            raise self.fail(
                "pushes.force",
                f"must be >= 0 N, got {force[0]:g}",
                "use non-negative magnitudes (the direction is random)",
            )
        duration = self._number(spec["duration"], "pushes.duration", "write the push duration in s")
        if duration <= 0:
            raise self.fail("pushes.duration", f"must be > 0 s, got {duration:g}", "use a positive duration")
        return PushSpec(interval, force, duration)
