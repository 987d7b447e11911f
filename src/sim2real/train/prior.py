"""Reward shaping from prior knowledge: ``r_total = r_env + lambda * r_prior``.

A prior is a small declarative file (``config/priors/*.yaml``) of terms over named signals the
task's env already computes (``RobotTaskEnv.PRIOR_SIGNALS``: a foot's touchdown force, the
trunk's tilt, a joint's speed near its limits, ...)::

    name: go2_gentle
    task: go2_walk                 # <robot>_<task>: whose signals the terms read
    description: walk gently, do not stomp
    terms:
      - name: soft_touchdown
        signal: touchdown_force    # N, the largest normal force of a foot landing this step
        shape: above               # penalise what exceeds the limit, squared
        limit: 80.0
        scale: 50.0                # (value - limit) / scale, so the term is O(1)
        weight: -0.5               # per second, as a task's reward weights (negative: a penalty)

Each term adds ``weight * dt * shape(u)`` to the step's reward, scaled by ``lambda`` (the
training config's ``prior`` section anneals it), with ``u = value / scale`` (``value``,
``abs``, ``square``, ``gaussian``: ``exp(-u^2)``) or ``u = (value - limit) / scale`` past the
limit (``above``: ``max(u, 0)^2``; ``below``: ``max(-u, 0)^2``). Nothing in a prior runs as
code: the file is plain YAML data, every field is checked against this schema and every signal
against the task's list, and anything else is refused with the field and the fix. A language
model may draft one (``sim2real prior draft``); what it drafts is checked the same way and
written for a person to read before any training uses it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from sim2real.core.config_files import ConfigError, available_configs, config_path

SHAPES = {
    "value": "u",
    "abs": "|u|",
    "square": "u^2",
    "gaussian": "exp(-u^2), a bounded bonus",
    "above": "max(u, 0)^2 with u = (value - limit) / scale",
    "below": "max(-u, 0)^2 with u = (value - limit) / scale",
}
LIMITED = ("above", "below")
TERM_FIELDS = ("name", "signal", "shape", "limit", "scale", "weight", "why")
SPEC_FIELDS = ("name", "task", "description", "terms")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_TERMS = 16
MAX_TEXT = 500  # characters of a description or a term's "why"


class PriorError(ConfigError):
    """A prior file that does not fit the schema; names the field and the fix."""


@dataclass(frozen=True)
class PriorTerm:
    name: str
    signal: str
    shape: str
    weight: float
    scale: float = 1.0
    limit: float = 0.0
    why: str = ""

    def __call__(self, value: float) -> float:
        """The term's shaped value (before weight, dt and lambda)."""
        u = ((value - self.limit) if self.shape in LIMITED else value) / self.scale
        if self.shape == "value":
            return u
        if self.shape == "abs":
            return abs(u)
        if self.shape == "square":
            return u * u
        if self.shape == "gaussian":
            return math.exp(-u * u)
        if self.shape == "above":
            return u * u if u > 0.0 else 0.0
        return u * u if u < 0.0 else 0.0  # below


@dataclass(frozen=True)
class PriorSpec:
    name: str
    task: str
    description: str
    terms: tuple[PriorTerm, ...]

    @property
    def signals(self) -> tuple[str, ...]:
        """The signals the terms read, each once."""
        return tuple(dict.fromkeys(term.signal for term in self.terms))

    def to_dict(self) -> dict[str, Any]:
        terms = []
        for term in self.terms:
            entry: dict[str, Any] = {"name": term.name, "signal": term.signal, "shape": term.shape}
            if term.shape in LIMITED:
                entry["limit"] = term.limit
            entry["scale"] = term.scale
            entry["weight"] = term.weight
            if term.why:
                entry["why"] = term.why
            terms.append(entry)
        return {"name": self.name, "task": self.task, "description": self.description, "terms": terms}


def task_signals(task: str, source: str | Path = "prior") -> dict[str, str]:
    """``<robot>_<task>`` -> the signals a prior may read: name -> meaning and unit."""
    from sim2real.train.tasks import TASKS

    for (robot, name), entry in TASKS.items():
        if f"{robot}_{name}" == task:
            return dict(entry.env_class.PRIOR_SIGNALS)
    known = sorted(f"{robot}_{name}" for robot, name in TASKS)
    raise PriorError(source, "task", f"{task!r} is not a task", f"use one of {known}")


def parse_prior(data: Any, source: str | Path = "prior", task: str | None = None) -> PriorSpec:
    """The spec in ``data`` (a loaded YAML mapping), checked field by field; ``task``: the task
    it must be for (a training run's)."""
    if not isinstance(data, Mapping):
        raise PriorError(source, "(file)", f"expected a mapping, got {type(data).__name__}", _SEE)
    unknown = [key for key in data if key not in SPEC_FIELDS]
    if unknown:
        raise PriorError(source, str(unknown[0]), "not a field of a prior", f"{_DECLARATIVE}; fields: {SPEC_FIELDS}")
    name = _name(data.get("name"), source, "name")
    spec_task = _text(data.get("task"), source, "task", required=True)
    signals = task_signals(spec_task, source)
    if task is not None and spec_task != task:
        raise PriorError(
            source, "task", f"the prior is for {spec_task!r}, the run trains {task!r}", "use a prior for this task"
        )
    description = _text(data.get("description", ""), source, "description")
    raw_terms = data.get("terms")
    if not isinstance(raw_terms, list) or not raw_terms:
        raise PriorError(source, "terms", "expected a list of at least one term", _SEE)
    if len(raw_terms) > MAX_TERMS:
        raise PriorError(source, "terms", f"{len(raw_terms)} terms, at most {MAX_TERMS}", "keep the few that matter")
    terms = [_term(raw, source, f"terms[{i}]", signals) for i, raw in enumerate(raw_terms)]
    names = [term.name for term in terms]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise PriorError(source, "terms", f"term names {repeated} appear more than once", "give each term its own name")
    return PriorSpec(name, spec_task, description, tuple(terms))


def load_prior(name_or_path: str | Path, task: str | None = None) -> PriorSpec:
    """A prior by name (``config/priors/<name>.yaml``) or path, checked."""
    path = config_path("priors", name_or_path)
    if not path.is_file():
        raise PriorError(
            path,
            "(file)",
            "no such file",
            f"give a prior YAML's path, or one of the shipped {available_configs('priors')}",
        )
    return parse_prior(read_yaml_data(path.read_text(), path), path, task)


def prior_from_setting(setting: Any, task: str | None = None) -> PriorSpec:
    """A training config's ``prior.spec``: a name or path (read now), or the spec itself inline
    (what a run saves, so a resume does not depend on the file)."""
    if isinstance(setting, Mapping):
        return parse_prior(setting, "prior.spec", task)
    if isinstance(setting, (str, Path)):
        return load_prior(setting, task)
    raise PriorError("prior.spec", "(value)", f"expected a prior's name, path or mapping, got {setting!r}", _SEE)


def read_yaml_data(text: str, source: str | Path) -> Any:
    """Plain YAML data only: a tag that would build an object (``!!python/...``) is refused."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PriorError(source, "(file)", f"not plain YAML data ({str(exc).splitlines()[0]})", _DECLARATIVE) from None


def write_prior(spec: PriorSpec, path: str | Path, header: str = "") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(spec.to_dict(), sort_keys=False))
    return path


@dataclass(frozen=True)
class PriorSchedule:
    """lambda at each iteration: ``start`` down (or up) to ``final`` by ``final_iteration``, held after."""

    start: float = 1.0
    final: float | None = None
    final_iteration: int | None = None
    first_iteration: int = 0

    def at(self, iteration: int) -> float:
        if self.final is None or self.final_iteration is None:
            return self.start
        span = self.final_iteration - self.first_iteration
        if span <= 0:
            return self.final
        share = min(max((iteration - self.first_iteration) / span, 0.0), 1.0)
        return self.start + share * (self.final - self.start)


def _term(raw: Any, source, field: str, signals: Mapping[str, str]) -> PriorTerm:
    if not isinstance(raw, Mapping):
        raise PriorError(source, field, f"expected a mapping, got {raw!r}", _SEE)
    unknown = [key for key in raw if key not in TERM_FIELDS]
    if unknown:
        raise PriorError(
            source, f"{field}.{unknown[0]}", "not a field of a term", f"{_DECLARATIVE}; fields: {TERM_FIELDS}"
        )
    name = _name(raw.get("name"), source, f"{field}.name")
    signal = raw.get("signal")
    if signal not in signals:
        raise PriorError(
            source, f"{field}.signal", f"{signal!r} is not a signal of this task", f"use one of {sorted(signals)}"
        )
    shape = raw.get("shape")
    if shape not in SHAPES:
        raise PriorError(source, f"{field}.shape", f"{shape!r} is not a shape", f"use one of {list(SHAPES)}")
    weight = _number(raw.get("weight"), source, f"{field}.weight")
    if weight == 0.0:
        raise PriorError(
            source, f"{field}.weight", "0 adds nothing", "give it a weight, negative for a penalty, or drop it"
        )
    scale = _number(raw.get("scale", 1.0), source, f"{field}.scale")
    if scale <= 0.0:
        raise PriorError(source, f"{field}.scale", f"{scale} is not > 0", "the signal is divided by it: give e.g. 1.0")
    if shape in LIMITED:
        if "limit" not in raw:
            raise PriorError(
                source, f"{field}.limit", f"shape {shape!r} needs a limit", "give the signal's value it starts at"
            )
        limit = _number(raw["limit"], source, f"{field}.limit")
    elif "limit" in raw:
        raise PriorError(
            source, f"{field}.limit", f"shape {shape!r} takes no limit", f"use {LIMITED} or drop the limit"
        )
    else:
        limit = 0.0
    why = _text(raw.get("why", ""), source, f"{field}.why")
    return PriorTerm(name, signal, shape, weight, scale, limit, why)


def _name(value: Any, source, field: str) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise PriorError(
            source, field, f"{value!r} is not a name", "write lower_case_with_underscores, at most 40 characters"
        )
    return value


def _text(value: Any, source, field: str, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value) or len(value) > MAX_TEXT:
        raise PriorError(source, field, f"expected text of at most {MAX_TEXT} characters, got {value!r}", _SEE)
    return value


def _number(value: Any, source, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PriorError(source, field, f"expected a finite number, got {value!r}", "write a number such as -0.5")
    return float(value)


_SEE = "see docs/train.md#reward-priors for the format"
_DECLARATIVE = "a prior is declarative: terms name a signal, a shape and numbers, and nothing in it runs as code"
