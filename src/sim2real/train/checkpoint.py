"""Training checkpoints: rsl_rl's state plus what resuming a run and exporting its policy need.

A checkpoint ``model_<iteration>.pt`` is a dict that rsl_rl's own
``OnPolicyRunner.load`` also reads (``actor_state_dict``, ``critic_state_dict``,
``optimizer_state_dict``, ``iter``, ``infos``), with these keys beside them:

``format``            ``sim2real.checkpoint/1``
``iteration``         training iterations completed
``robot``, ``task``   what was trained
``training_config``   the resolved training config (our YAML, after defaults and CLI overrides)
``rsl_rl_config``     the config dict rsl_rl was built from (rebuilds the actor at export)
``interface``         how the policy meets the robot (:func:`describe_env`): joints, gains,
                      action mapping, observation layout, control period, task config
``randomization``     the current randomization (after adaptive DR) as ``Randomization.to_dict``
``adr``, ``curriculum``  their ``state_dict()`` (``adr`` None when off)
``source``            ``{"commit", "dirty"}`` of the code that trained it
``torch_rng``         the learner's torch RNG state, so a resumed run samples on
``warm_start``        (only in a run started with :func:`warm_start`) ``{"from", "iteration"}``

Everything is plain Python, numbers, strings and tensors, so it loads with
``torch.load(weights_only=True)``: opening a checkpoint never runs code from it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.core.errors import InputError

FORMAT = "sim2real.checkpoint/1"
REQUIRED = (
    "format",
    "actor_state_dict",
    "critic_state_dict",
    "optimizer_state_dict",
    "iteration",
    "robot",
    "task",
    "training_config",
    "rsl_rl_config",
    "interface",
)


class CheckpointError(InputError):
    """A checkpoint that cannot be used, with the file and the reason in the message."""

    def __init__(self, path: str | Path, problem: str, fix: str):
        super().__init__(f"{path}: {problem}. Fix: {fix}")


def _per_joint(value: Any, n: int, what: str) -> list[float]:
    array = np.asarray(value, dtype=float)
    if array.ndim > 1 or array.size not in (1, n):
        raise ValueError(f"{what} must be a number or {n} numbers (one per joint), got shape {array.shape}")
    return [float(v) for v in np.broadcast_to(array.reshape(-1), (n,))]


def describe_env(env: Any) -> dict[str, Any]:
    """How a task env's policy meets the robot, as JSON-friendly values (for an env in a
    worker: ``ProcessVecEnv.run_on_first(describe_env)``)."""
    profile, spec = env.profile, env.observation_spec
    names = list(profile.joint_names)
    n = len(names)
    clip = env.action_clip

    def get(name: str) -> Any:
        return getattr(env, name)

    return {
        "robot": profile.name,
        "task": get("task_name"),
        "joint_names": names,
        "observation_terms": spec.to_metadata(),
        "observation_size": int(spec.size),
        "num_actions": n,
        "action_scale": _per_joint(get("action_scale"), n, "action_scale"),
        "action_offset": _per_joint(get("action_offset"), n, "action_offset"),
        "action_clip": None if clip is None or math.isinf(float(clip)) else float(clip),
        "default_joint_positions": _per_joint(profile.default_positions, n, "default_positions"),
        "control_period": float(get("policy_period")),
        "physics_period": float(get("physics_period")),
        "kp": _per_joint(profile.kp, n, "kp"),
        "kd": _per_joint(profile.kd, n, "kd"),
        "max_episode_steps": int(get("max_episode_steps")),
        "task_config": json.loads(json.dumps(get("task_config"))),
        "trained_robot": trained_robot(profile, float(get("physics_period")), getattr(env, "engine", "pybullet")),
    }


def trained_robot(profile: Any, physics_period: float, engine: str) -> dict[str, Any]:
    """The actuator model, nominal world and robot description a policy trains with
    (docs/policy_format.md: sim2real.actuator, .world, .robot_model), recorded in the checkpoint
    at training time so an export states what the policy met, not what the tree holds later.
    Empty for a robot without a URDF-backed profile (test doubles)."""
    import hashlib

    from sim2real.sim.conditions import PhysicalConditions
    from sim2real.sim.world_base import GRAVITY

    try:
        urdf = Path(profile.urdf)
        sha256 = hashlib.sha256(urdf.read_bytes()).hexdigest()
        effort, velocity = profile.effort_limits.tolist(), profile.velocity_limits.tolist()
    except (AttributeError, OSError):
        return {}
    return {
        "actuator": {
            "model": "pd_torque",
            "physics_period": physics_period,
            "pd_rate_hz": 1.0 / physics_period,
            "effort_limits": effort,
            "velocity_limits": velocity,
            "damping_kd": profile.damping_kd,
            "gravity_compensation": bool(profile.gravity_compensation),
        },
        "world": {
            "engine": engine,
            "physics_period": physics_period,
            "gravity": GRAVITY,
            "ground_friction": PhysicalConditions().ground_friction,
            "spawn_height": profile.spawn_height,
        },
        "robot_model": {"urdf": urdf.name, "sha256": sha256},
    }


def source_revision(where: Path | None = None) -> dict[str, str]:
    """The git commit of the code that runs (``unknown`` outside a git checkout) and
    whether it has uncommitted changes."""
    where = where or Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": "unknown", "dirty": "unknown"}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": "unknown" if status is None else ("true" if status else "false")}


def save_checkpoint(path: str | Path, checkpoint: dict[str, Any]) -> Path:
    """Write atomically: a run killed mid-save leaves the previous checkpoint intact."""
    import torch

    missing = [key for key in REQUIRED if key not in checkpoint]
    if missing:
        raise ValueError(f"checkpoint lacks {missing}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(checkpoint, partial)
    os.replace(partial, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(path, "no such file", "give the path to a model_<iteration>.pt of a training run")
    with path.open("rb") as handle:
        is_zip = handle.read(4) == b"PK\x03\x04"  # torch.save writes a zip archive
    if not is_zip:
        raise CheckpointError(
            path, "not a PyTorch checkpoint file", "give a model_<iteration>.pt written by `sim2real train`"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        if "weights_only" in str(exc):
            problem = "holds Python objects beyond tensors and plain data, so it was not written by sim2real"
        else:
            problem = (
                f"unreadable ({str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__})"
            )
        raise CheckpointError(path, problem, "give a model_<iteration>.pt written by `sim2real train`") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        found = checkpoint.get("format") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(
            path,
            f"not a {FORMAT} checkpoint (format: {found!r})",
            "give a model_<iteration>.pt written by `sim2real train`",
        )
    missing = [key for key in REQUIRED if key not in checkpoint]
    if missing:
        raise CheckpointError(path, f"incomplete checkpoint, missing {missing}", "use another checkpoint of the run")
    return checkpoint


NETWORK_KEYS = ("actor_hidden_dims", "critic_hidden_dims", "activation", "obs_normalization")


def warm_start(checkpoint: dict[str, Any], config: dict[str, Any], path: str | Path = "<checkpoint>") -> dict[str, Any]:
    """The checkpoint's networks, normalizer and optimizer under another training config:
    a fine-tune (other rewards, randomization or curriculum) that goes on counting iterations
    from the checkpoint's. The config's randomization replaces the trained ranges (ADR state
    is dropped); an automatic curriculum's difficulty carries over (within the new config's
    range) when the config's curriculum is automatic too; any other starts afresh. When the
    config's ``critic_observation`` differs from the checkpoint's, only the actor carries
    over (``critic_state_dict`` and ``optimizer_state_dict`` None: the runner starts them afresh)."""
    for key in ("robot", "task"):
        if checkpoint[key] != config[key]:
            raise CheckpointError(
                path,
                f"it is a {checkpoint['robot']} {checkpoint['task']} checkpoint and the "
                f"config trains {config['robot']} {config['task']}",
                "warm-start from a checkpoint of the same robot and task",
            )
    old, new = checkpoint["training_config"]["policy"], config["policy"]
    differences = [
        f"{key} {old.get(key)!r} -> {new.get(key)!r}" for key in NETWORK_KEYS if old.get(key) != new.get(key)
    ]
    if differences:
        raise CheckpointError(
            path,
            f"the config's networks differ from the checkpoint's ({'; '.join(differences)})",
            "keep the checkpoint's policy section (sizes, activation, normalization) or train from scratch",
        )
    warm = dict(checkpoint)
    # The learner's random stream starts from the new config's seed (torch_rng None).
    warm.update(
        training_config=config,
        randomization=None,
        adr=None,
        torch_rng=None,
        # A domain classifier judged the old run's robot data: a fine-tune trains its own.
        domain_adaptation=None,
        warm_start={"from": str(path), "iteration": int(checkpoint["iteration"])},
    )
    if checkpoint["training_config"].get("critic_observation", "policy") != config.get("critic_observation", "policy"):
        # Another critic input: the critic and its optimizer state start afresh, the actor carries over.
        warm.update(critic_state_dict=None, optimizer_state_dict=None)
    curriculum = checkpoint.get("curriculum")
    new_curriculum = config.get("curriculum") or {}  # None: the config has no curriculum
    if curriculum is None or curriculum.get("kind") != "automatic" or new_curriculum.get("kind") != "automatic":
        # Only an automatic curriculum's difficulty is a skill level worth keeping; a scheduled one
        # (linear, reverse) or none follows the new config from its start.
        warm["curriculum"] = None
    return warm


def checkpoints_of(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Every ``model_<n>.pt`` in a run folder as (n, path), in iteration order."""
    found = []
    for candidate in Path(run_dir).glob("model_*.pt"):
        stem = candidate.stem.split("_", 1)[1]
        if stem.isdigit():
            found.append((int(stem), candidate))
    return sorted(found)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The ``model_<n>.pt`` with the highest ``n`` in a run folder."""
    found = checkpoints_of(run_dir)
    return found[-1][1] if found else None
