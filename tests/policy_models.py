"""Small ONNX policies with behaviour the tests choose (constant, NaN, huge, mislabelled,
stepping with the gait clock).

Built like the exporter builds the real ones: a torch MLP through the TorchScript ONNX
exporter (input ``obs``, output ``actions``), the sim2real metadata written with the
onnx package. The last layer's weights are zero, so the output is exactly its bias
whatever the observation: a test states the joint targets it wants and gets them.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

from sim2real.core.observation import ObservationSpec
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import INPUT_NAME, OUTPUT_NAME, PolicyMetadata
from sim2real.core.robot_profile import RobotProfile

TASKS = {"quadruped": "walk", "arm": "reach"}


def task_config(profile: RobotProfile) -> dict:
    task = TASKS[profile.kind]
    return yaml.safe_load((share_dir() / "config" / "tasks" / f"{profile.name}_{task}.yaml").read_text())


def task_observation(profile: RobotProfile) -> list[dict]:
    return task_config(profile)["observation"]


def metadata(profile: RobotProfile, observation: Sequence[dict] | None = None, **changes) -> PolicyMetadata:
    """The metadata an export for ``profile`` would carry, with ``changes`` applied."""
    n = profile.num_joints
    spec = ObservationSpec.from_config(observation or task_observation(profile), n)
    base = PolicyMetadata(
        robot=profile.name,
        task=TASKS[profile.kind],
        joint_names=tuple(profile.joint_names),
        observation_spec=spec,
        action_scale=np.full(n, 0.25),
        action_offset=profile.default_positions.copy(),
        action_clip=100.0,
        default_joint_positions=profile.default_positions.copy(),
        control_period=profile.policy_period,
        kp=profile.kp.copy(),
        kd=profile.kd.copy(),
        source_commit="test",
        # What the runtime reads from the task config: the gait clock's settings, if any.
        task_config={k: v for k, v in task_config(profile).items() if k == "gait"},
    )
    return dataclasses.replace(base, **changes)


def actions_for(meta: PolicyMetadata, targets: Sequence[float]) -> np.ndarray:
    """The constant action whose joint targets are ``targets``."""
    return (np.asarray(targets, dtype=float) - meta.action_offset) / meta.action_scale


def write_policy(
    path: str | Path,
    meta: PolicyMetadata,
    output: Sequence[float] | float,
    hidden: Sequence[int] = (32,),
    input_size: int | None = None,
    weight: np.ndarray | None = None,
) -> Path:
    """A policy whose actions are always ``output`` (per joint, or one value for all; NaN and
    huge values allowed). ``input_size`` other than the metadata's makes a mislabelled graph.
    ``weight`` (actions x last hidden layer, or x observation with ``hidden=()``): the last
    layer's weights instead of zeros, for a policy that reacts to what it observes."""
    import onnx
    import torch

    n_in = input_size or meta.observation_size
    n_out = meta.num_joints
    sizes = [n_in, *hidden]
    layers: list[torch.nn.Module] = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ELU()]
    last = torch.nn.Linear(sizes[-1], n_out)
    with torch.no_grad():
        last.weight.copy_(torch.zeros_like(last.weight) if weight is None else torch.as_tensor(weight))
        last.bias.copy_(torch.as_tensor(np.broadcast_to(np.asarray(output, dtype=np.float32), (n_out,)).copy()))
    model = torch.nn.Sequential(*layers, last).eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, n_in),),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
        )
    proto = onnx.load_from_string(buffer.getvalue())
    for key, value in meta.to_props().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(proto.SerializeToString())
    return path


def write_target_policy(path: str | Path, profile: RobotProfile, targets: Sequence[float], **changes) -> Path:
    """A policy that always commands ``targets`` (rad, profile order)."""
    meta = metadata(profile, **changes)
    return write_policy(path, meta, actions_for(meta, targets))


def write_clock_policy(path: str | Path, profile: RobotProfile, amplitude: float) -> Path:
    """A policy whose joint targets are ``default + amplitude * sin(2 pi gait_phase)`` on
    every joint: a stand-in for a trot, whose targets depend on where it is in its gait."""
    meta = metadata(profile)
    spec = meta.observation_spec
    clock = spec.slices()["gait_clock"].start  # sin comes first
    scale = next(term.scale for term in spec.terms if term.name == "gait_clock")
    weight = np.zeros((meta.num_joints, meta.observation_size), dtype=np.float32)
    weight[:, clock] = amplitude / (scale * meta.action_scale)
    return write_policy(path, meta, 0.0, hidden=(), weight=weight)
