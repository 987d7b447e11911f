"""The task registry: (robot, task) -> environment class and its config file.

``make_env("go2", "walk", seed=0, randomization="go2_reference")`` is how everything
(training, evaluation, export, tests) builds an environment. A task's config is
``config/tasks/<robot>_<task>.yaml``; overrides may only name keys that file declares,
so a typo fails loudly instead of being ignored. The envs are also registered with
gymnasium as ``sim2real/Go2Walk-v0`` and ``sim2real/PandaReach-v0``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import gymnasium
import yaml

from sim2real.core.errors import InputError
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile
from sim2real.sim.engines import DEFAULT_ENGINE
from sim2real.train.envs.base import RobotTaskEnv
from sim2real.train.envs.go2_walk import Go2WalkEnv
from sim2real.train.envs.panda_reach import PandaReachEnv


@dataclass(frozen=True)
class TaskEntry:
    env_class: type[RobotTaskEnv]
    config_name: str  # config/tasks/<config_name>.yaml
    gym_id: str


TASKS: dict[tuple[str, str], TaskEntry] = {
    ("go2", "walk"): TaskEntry(Go2WalkEnv, "go2_walk", "sim2real/Go2Walk-v0"),
    ("panda", "reach"): TaskEntry(PandaReachEnv, "panda_reach", "sim2real/PandaReach-v0"),
}


class TaskConfigError(InputError):
    """A task config override that does not fit the task's declared config."""


def task_entry(robot: str, task: str) -> TaskEntry:
    try:
        return TASKS[(robot, task)]
    except KeyError:
        known = ", ".join(f"--robot {r} --task {t}" for r, t in TASKS)
        raise ValueError(f"no task {task!r} for robot {robot!r}; known: {known}") from None


def task_config_path(robot: str, task: str) -> Path:
    return share_dir() / "config" / "tasks" / f"{task_entry(robot, task).config_name}.yaml"


def load_task_config(robot: str, task: str, overrides: Mapping[str, Any] | str | Path | None = None) -> dict:
    """The task's default config with ``overrides`` (a mapping or a YAML file) merged in."""
    path = task_config_path(robot, task)
    config = yaml.safe_load(path.read_text())
    if overrides is None:
        return config
    source = "overrides"
    if isinstance(overrides, (str, Path)):
        source = str(overrides)
        try:
            overrides = yaml.safe_load(Path(overrides).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise TaskConfigError(f"{source}: cannot read the task config ({exc})") from None
    if not isinstance(overrides, Mapping):
        raise TaskConfigError(f"{source}: expected a mapping of config keys, got {overrides!r}")
    _merge(config, overrides, "", source, path)
    return config


def _merge(base: dict, overrides: Mapping, prefix: str, source: str, defaults: Path) -> None:
    for key, value in overrides.items():
        field = f"{prefix}{key}"
        if key not in base:
            raise TaskConfigError(
                f"{source}: unknown task config key {field!r}; known keys here: {sorted(base)} (declared in {defaults})"
            )
        if isinstance(base[key], dict):
            if not isinstance(value, Mapping):
                raise TaskConfigError(f"{source}: {field} must be a mapping like the default {base[key]!r}")
            _merge(base[key], value, f"{field}.", source, defaults)
        else:
            # Lists (the observation layout, ranges) are replaced whole, never merged.
            base[key] = copy.deepcopy(value)


def make_env(
    robot: str,
    task: str,
    seed: int = 0,
    randomization=None,
    config: Mapping[str, Any] | str | Path | None = None,
    engine: str = DEFAULT_ENGINE,
    model: str | None = None,
) -> RobotTaskEnv:
    """Build a task env. ``randomization``: a Randomization, its name (``go2_reference``)
    or path, or None (nominal). ``config``: overrides of the task's YAML defaults. The
    first ``reset()`` without a seed uses ``seed``. ``engine``: the physics engine
    (``pybullet`` or ``mujoco``); ``model``: on MuJoCo, another robot model than the profile's."""
    entry = task_entry(robot, task)
    if isinstance(randomization, (str, Path)):
        from sim2real.sim.randomization import load_randomization

        randomization = load_randomization(randomization)
    profile = load_profile(robot)
    env = entry.env_class(profile, load_task_config(robot, task, config), randomization=randomization, seed=seed)
    env.set_engine(engine, model)
    return env


def _gym_factory(robot: str, task: str):
    def create(**kwargs) -> RobotTaskEnv:
        return make_env(robot, task, **kwargs)

    return create


for (_robot, _task), _entry in TASKS.items():
    if _entry.gym_id not in gymnasium.registry:
        gymnasium.register(_entry.gym_id, entry_point=_gym_factory(_robot, _task))
