"""Reality sets: robots no training or fitting code sees, to measure transfer on.

A reality set (``config/reality/<name>.yaml``) names a robot profile, an engine and a robot
model (the MuJoCo world with an independently written Go2, say) and a distribution of
physical conditions in the randomization format. The draws depend on a secret seed kept in
``<name>.seed`` beside the YAML, which only this module reads: a training run, a system
identification or a randomization fitted to bags cannot tune itself to the draws, because
no code of theirs can make them (``tests/unit/test_reality_sets.py`` enforces that no module
under ``train/``, ``sysid/``, ``sim/`` or ``core/``, nor the pipeline or the sysid recording,
imports this one or names the seed files). What they see of a reality is what a user sees of
a robot: bags and logs recorded on its robots through the graph (``hardware:=mujoco
reality:=<name> reality_robot:=K``, whose sim_robot alone draws the robot) and evaluation
figures.

``--worlds reality:<name>`` makes a world set of it: each episode draws one robot, from the
secret seed and the episode's own seed. The graph's robot K comes from a stream of its own,
so no robot measured through the graph is one an evaluation scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.core.config_files import ConfigError, read_config
from sim2real.sim.engines import check_engine
from sim2real.sim.randomization import Randomization, RandomizationError

PREFIX = "reality:"


class RealityError(ConfigError):
    """A reality set that cannot be used, with the fix."""


@dataclass(frozen=True)
class RealityConditions:
    """A world set's draw for a reality: the randomization interface (``sample``, ``pushes``,
    ``parameters``, ``name``) over the hidden seed. Each draw mixes the secret with one number
    from the episode's generator, so episode ``k`` of an evaluation gets the same robot
    whenever it runs, and nobody without the secret gets it."""

    name: str
    distribution: Randomization
    secret: int | None  # None: read without the seed (what the set is, not its robots)

    @property
    def parameters(self) -> dict[str, Any]:
        return self.distribution.parameters

    @property
    def pushes(self) -> None:
        return None  # shoves belong to scenarios, not to the robot

    def sample(self, rng: np.random.Generator) -> dict[str, float]:
        if self.secret is None:
            raise RealityError(
                self.name, "seed", "this copy of the set was read without its secret", "draw with load_reality(name)"
            )
        episode = int(rng.integers(2**62))
        return self.distribution.sample(np.random.default_rng([self.secret, episode]))

    def to_dict(self) -> dict[str, Any]:
        """What a report may show: the distribution, never the secret."""
        return {
            "name": self.name,
            "reality": True,
            **{k: v for k, v in self.distribution.to_dict().items() if k != "name"},
        }

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"RealityConditions({self.name!r})"


@dataclass(frozen=True)
class RealitySet:
    name: str
    robot: str
    engine: str
    model: str | None
    conditions: RealityConditions
    source: str


def load_reality(name_or_path: str | Path, *, secret: bool = True) -> RealitySet:
    """A reality set by name (``go2_independent``) or path; RealityError names what is wrong.
    ``secret=False`` leaves the seed unread: the set's robot, engine and model and its published
    distribution, but no draws (what a launch plan checks)."""
    path, data = read_config("reality", name_or_path, RealityError, "reality set")

    def fail(field: str, problem: str, fix: str) -> RealityError:
        return RealityError(path, field, problem, fix)

    unknown = sorted(set(data) - {"name", "robot", "engine", "model", "conditions"})
    if unknown:
        raise fail(unknown[0], "unknown key", "use name, robot, engine, model, conditions")
    for key in ("name", "robot", "engine"):
        if not isinstance(data.get(key), str):
            raise fail(key, f"expected a string, got {data.get(key)!r}", f"write {key}: ...")
    try:
        engine = check_engine(data["engine"])
    except ValueError as exc:
        raise fail("engine", str(exc), "use mujoco (or pybullet)") from None
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise fail("model", f"expected a model name or path, got {model!r}", "write model: example-robot-data:go2")
    conditions = data.get("conditions")
    if not isinstance(conditions, dict):
        raise fail(
            "conditions", "missing", "give a distribution in the randomization format: conditions: {parameters: {...}}"
        )
    try:
        distribution = Randomization.from_dict({"name": data["name"], **conditions}, source=path)
    except RandomizationError as exc:
        raise fail("conditions", str(exc), "fix the distribution") from None
    if distribution.pushes is not None:
        raise fail("conditions.pushes", "a reality set draws robots, not shoves", "put pushes in a suite scenario")
    seed_file = Path(path).with_suffix(".seed")
    try:
        drawn_with = int(seed_file.read_text().strip()) if secret else None
    except (OSError, ValueError):
        raise fail(
            "seed",
            f"no secret seed in {seed_file}",
            f"write one integer to {seed_file} (once: changing it draws other robots)",
        ) from None
    return RealitySet(
        name=data["name"],
        robot=data["robot"],
        engine=engine,
        model=model,
        conditions=RealityConditions(f"{PREFIX}{data['name']}", distribution, drawn_with),
        source=str(path),
    )


# The sensor noise a reality robot's driver states in its messages (the IMU's covariance): the
# set's published mean, as a datasheet gives it, never the robot's drawn value.
STATED_NOISE = ("gyro_noise", "accelerometer_noise")
# The graph's robots come from their own stream of draws: an evaluation's episode k draws from
# default_rng(seed + k), so robot K of the graph is never a robot an evaluation scores.
_GRAPH_ROBOTS = 0x6772_6170


@dataclass(frozen=True)
class RealityRobot:
    """One robot of a reality set, as a simulated robot node runs it: the engine and model to
    load, the hidden conditions to run under, and the noise its driver may state."""

    engine: str
    model: str | None
    conditions: Any  # sim.conditions.PhysicalConditions, hidden
    stated: Any  # PhysicalConditions with the set's mean sensor noise, else nominal

    def __repr__(self) -> str:
        return f"RealityRobot({self.engine!r}, {self.model!r})"


def load_reality_robot(name: str, index: int, robot: str, conditions: str = "{}") -> RealityRobot:
    """Robot ``index`` of reality set ``name`` for profile ``robot``: the same robot whenever it
    is asked for. ``conditions`` must be empty (a reality's conditions are its own); RealityError
    or ValueError names what is wrong."""
    from sim2real.sim.conditions import PhysicalConditions

    reality = load_reality(name)
    if reality.robot != robot:
        raise RealityError(
            reality.source,
            "robot",
            f"a {reality.robot!r} set, asked for a {robot!r}",
            f"run it with robot {reality.robot}",
        )
    if conditions_given(conditions):
        raise ValueError(
            f"reality set {reality.name!r} brings its own physical conditions; leave conditions out (got {conditions!r})"
        )
    if index < 0:
        raise ValueError(f"reality robot {index} does not exist: robots are numbered 0, 1, 2, ...")
    drawn = reality.conditions.sample(np.random.default_rng([_GRAPH_ROBOTS, index]))
    means = reality.conditions.parameters
    stated = {name: means[name].mean for name in STATED_NOISE if name in means}
    return RealityRobot(
        engine=reality.engine,
        model=reality.model,
        conditions=PhysicalConditions(**drawn).validate(),
        stated=PhysicalConditions(**stated).validate(),
    )


def conditions_given(conditions: str) -> bool:
    """Whether a conditions YAML sets anything (``''``, ``'{}'`` and ``'{ }'`` do not)."""
    import yaml

    try:
        return bool(yaml.safe_load(conditions or "{}"))
    except yaml.YAMLError:
        return True  # not empty, whatever it is
