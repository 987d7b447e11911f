"""How a training run starts: from scratch, resumed from its own checkpoint, or fine-tuned from
another run's checkpoint or a policy file. The rules `sim2real train` applies to its arguments,
kept here so the command line only translates them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim2real.core.errors import InputError


class RunStartError(InputError):
    """A combination of start arguments that cannot work; the message says what to do instead."""


@dataclass
class RunStart:
    config: dict[str, Any]  # the resolved training config
    out: Path  # the run's folder
    resume: Path | str | None  # the checkpoint the Trainer continues from (None: from scratch)
    announcement: str | None = None  # what to tell the user before training


def plan_run_start(
    *,
    out: str | None,
    robot: str | None,
    task: str | None,
    config: str | None,
    resume: str | None,
    init_from: str | None,
    overrides: dict[str, Any],
) -> RunStart:
    """The start of `sim2real train` for these arguments. ``overrides``: iterations, num_envs,
    workers, seed (None = the config's). Raises RunStartError with the fix."""
    if resume and init_from:
        raise RunStartError(
            "--resume and --init-from exclude each other: --resume continues a run as it was, "
            "--init-from starts a new run (--out, --config) from a checkpoint's networks"
        )
    if init_from:
        return fine_tune_start(init_from, out, robot, task, config, overrides)
    if resume:
        return resume_start(resume, out, robot, task, config, overrides)
    return new_start(out, robot, task, config, overrides)


def new_start(
    out: str | None, robot: str | None, task: str | None, config: str | None, overrides: dict[str, Any]
) -> RunStart:
    from sim2real.train.tasks import task_entry
    from sim2real.train.train_config import load_train_config

    if out is None or (config is None and (robot is None or task is None)):
        raise RunStartError(
            "--out and either --robot and --task or a --config naming them are required (or --resume CHECKPOINT)"
        )
    if config is None:
        try:
            task_entry(robot, task)
        except ValueError as exc:
            raise RunStartError(str(exc)) from None
    resolved = load_train_config(robot, task, config, overrides)
    try:
        task_entry(resolved["robot"], resolved["task"])
    except ValueError as exc:
        raise RunStartError(f"{config}: {exc}") from None
    return RunStart(resolved, Path(out), None)


def resume_start(
    resume: str, out: str | None, robot: str | None, task: str | None, config: str | None, overrides: dict[str, Any]
) -> RunStart:
    from sim2real.train.checkpoint import load_checkpoint
    from sim2real.train.train_config import override_config

    if config:
        raise RunStartError(
            "--config cannot be combined with --resume: a resumed run keeps its checkpoint's "
            "config (override --iterations, --num-envs, --workers, --seed)"
        )
    checkpoint = load_checkpoint(resume)
    for key, given in (("robot", robot), ("task", task)):
        if given is not None and given != checkpoint[key]:
            raise RunStartError(f"--{key} {given} does not match the checkpoint's {key} {checkpoint[key]!r}")
    resolved = override_config(checkpoint["training_config"], overrides, source=f"{resume} + command line")
    if checkpoint["iteration"] >= resolved["iterations"]:
        raise RunStartError(
            f"{resume} has already run {checkpoint['iteration']} of {resolved['iterations']} "
            f"iterations; pass --iterations N with N > {checkpoint['iteration']} (the run's total)"
        )
    return RunStart(
        resolved,
        Path(out) if out else Path(resume).parent,
        resume,
        f"resuming {resume} at iteration {checkpoint['iteration']}",
    )


def fine_tune_start(
    init_from: str, out: str | None, robot: str | None, task: str | None, config: str | None, overrides: dict[str, Any]
) -> RunStart:
    """A new run in ``out`` whose networks come from a checkpoint or a policy file: the warm start
    is written there as warm_start.pt, the checkpoint the run then resumes from."""
    from sim2real.train.checkpoint import (
        CheckpointError,
        latest_checkpoint,
        load_checkpoint,
        save_checkpoint,
        warm_start,
    )
    from sim2real.train.train_config import load_train_config

    if out is None:
        raise RunStartError("--init-from needs --out: the fine-tune is a new run")
    from_policy = Path(init_from).suffix == ".onnx"
    if from_policy:
        from sim2real.core.policy_file import PolicyFileError, load_policy
        from sim2real.train.policy_warm_start import warm_start_from_policy

        try:
            meta = load_policy(init_from).metadata
        except PolicyFileError as exc:
            raise RunStartError(str(exc)) from None
        robot, task = robot or meta.robot, task or meta.task
    else:
        source = load_checkpoint(init_from)
        robot, task = robot or source["robot"], task or source["task"]
    resolved = load_train_config(robot, task, config, overrides)
    try:
        warm = warm_start_from_policy(init_from, resolved) if from_policy else warm_start(source, resolved, init_from)
    except CheckpointError as exc:
        raise RunStartError(str(exc)) from None
    if warm["iteration"] >= resolved["iterations"]:
        raise RunStartError(
            f"{init_from} has already run {warm['iteration']} iterations and the fine-tune "
            f"would stop at {resolved['iterations']}; pass --iterations N with N > "
            f"{warm['iteration']} (iterations count on from the checkpoint's)"
        )
    folder = Path(out)
    existing = latest_checkpoint(folder) if folder.is_dir() else None
    if existing is not None:
        raise RunStartError(f"{folder} already holds a training run ({existing.name}): choose another --out")
    folder.mkdir(parents=True, exist_ok=True)
    resume = save_checkpoint(folder / "warm_start.pt", warm)
    return RunStart(
        resolved,
        folder,
        resume,
        f"warm start from {init_from} (iteration {warm['iteration']}) with "
        f"{config or f'config/train/{robot}_{task}.yaml'}",
    )
