"""Checkpoint -> the deployed policy: one ONNX file, metadata inside, checked against torch.

The graph is rsl_rl's deterministic actor, observation normalizer included
(``MLPModel.as_onnx``): the runtime feeds raw observations, exactly as the env built
them. rsl_rl's own ONNX helper goes through torch's dynamo exporter, which writes the
weights to a ``.onnx.data`` sidecar; a deployed policy must be ONE file (it is copied,
hashed and hot-swapped as a unit), so the model is exported here with the TorchScript
exporter into memory, checked for external data, and written once. Should a future
torch drop that exporter, the dynamo path is used and its weights are embedded again.

Before the file is kept, the same 1000 observations go through torch and through
onnxruntime (via :func:`sim2real.core.policy_file.load_policy`, as the robot will load
it); a difference above ``tolerance`` deletes the file and fails the export.
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.core.errors import Sim2RealError
from sim2real.core.observation import ObservationSpec
from sim2real.core.policy_file import INPUT_NAME, OUTPUT_NAME, PolicyFile, PolicyMetadata, load_policy
from sim2real.train.checkpoint import load_checkpoint, source_revision

OPSET = 17
PARITY_SAMPLES = 1000
PARITY_TOLERANCE = 1e-5


class ExportError(Sim2RealError, RuntimeError):
    """An export that must not produce a policy file, with the reason and the fix."""


@dataclass
class ExportReport:
    path: Path
    policy: PolicyFile
    max_abs_diff: float
    samples: int
    size_bytes: int
    iteration: int
    opset: int = 0  # the default ONNX domain's opset the file declares


def _check_finite(state: dict[str, Any], path: Path) -> None:
    import torch

    bad = {
        name: int((~torch.isfinite(t)).sum())
        for name, t in state.items()
        if torch.is_tensor(t) and t.is_floating_point() and not torch.isfinite(t).all()
    }
    if bad:
        listed = ", ".join(f"{name} ({count} values)" for name, count in bad.items())
        raise ExportError(
            f"{path}: the actor has non-finite weights (NaN or inf): {listed}. The training "
            "diverged before this checkpoint. Fix: export an earlier checkpoint of the run, or "
            "retrain with a lower learning rate"
        )


def build_actor(checkpoint: dict[str, Any]):
    """The deterministic actor ``obs [B, n_obs] -> actions [B, n_joints]`` as a torch
    module in eval mode, observation normalizer included."""
    import torch
    from rsl_rl.utils import resolve_class
    from tensordict import TensorDict

    cfg, interface = checkpoint["rsl_rl_config"], checkpoint["interface"]
    obs_size, num_actions = interface["observation_size"], len(interface["joint_names"])
    groups = sorted({g for sets in cfg["obs_groups"].values() for g in sets})
    dummy = TensorDict({g: torch.zeros(1, obs_size) for g in groups}, batch_size=[1])
    actor_class, actor_cfg = resolve_class(cfg["actor"])
    actor = actor_class(dummy, cfg["obs_groups"], "actor", num_actions, **actor_cfg)
    actor.load_state_dict(checkpoint["actor_state_dict"])
    model = actor.as_onnx(verbose=False)
    model.eval()
    return model


def _to_onnx_bytes(model, obs_size: int) -> bytes:
    import onnx
    import torch

    dummy = torch.zeros(1, obs_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter warns that it is deprecated
        try:
            buffer = io.BytesIO()
            torch.onnx.export(
                model,
                (dummy,),
                buffer,
                dynamo=False,
                opset_version=OPSET,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
            )
            return buffer.getvalue()
        except (TypeError, RuntimeError, NotImplementedError):
            pass  # no TorchScript exporter in this torch: use dynamo, then embed its sidecar weights
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "policy.onnx"
            torch.onnx.export(
                model,
                (dummy,),
                str(path),
                dynamo=True,
                opset_version=max(OPSET, 18),
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_shapes=({0: torch.export.Dim("batch")},),
            )
            proto = onnx.load(str(path), load_external_data=True)
            onnx.external_data_helper.convert_model_from_external_data(proto)
            return proto.SerializeToString()


def _with_metadata(data: bytes, props: dict[str, str]) -> tuple[bytes, int]:
    """The file's bytes with ``props`` as its metadata, and the default ONNX domain's opset it declares."""
    import onnx

    proto = onnx.load_from_string(data)
    external = [t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        raise ExportError(
            f"the exported graph keeps weights outside the file ({external[:3]}...); a policy must be one file"
        )
    onnx.checker.check_model(proto)
    kept = [p for p in proto.metadata_props if not p.key.startswith("sim2real.")]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    proto.producer_name = "sim2real"
    opset = max(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    return proto.SerializeToString(), opset


def policy_metadata(checkpoint: dict[str, Any], checkpoint_path: str | Path) -> PolicyMetadata:
    interface = checkpoint["interface"]
    source = checkpoint.get("source") or source_revision()
    return PolicyMetadata(
        robot=interface["robot"],
        task=interface["task"],
        joint_names=tuple(interface["joint_names"]),
        observation_spec=ObservationSpec.from_metadata(interface["observation_terms"]),
        action_scale=np.array(interface["action_scale"]),
        action_offset=np.array(interface["action_offset"]),
        action_clip=interface["action_clip"],
        default_joint_positions=np.array(interface["default_joint_positions"]),
        control_period=interface["control_period"],
        kp=np.array(interface["kp"]),
        kd=np.array(interface["kd"]),
        task_config=interface["task_config"],
        training_config=checkpoint["training_config"],
        randomization=checkpoint.get("randomization"),
        source_commit=source.get("commit", "unknown"),
        source_dirty=source.get("dirty", "unknown"),
        export_time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        checkpoint=f"{checkpoint_path} (iteration {checkpoint['iteration']})",
        # Recorded at training time (older checkpoints lack it: then nothing is claimed).
        difficulty=_difficulty(checkpoint),
        **(interface.get("trained_robot") or {}),
    )


def _difficulty(checkpoint: dict[str, Any]) -> float | None:
    curriculum = checkpoint.get("curriculum")
    value = curriculum.get("difficulty") if isinstance(curriculum, dict) else None
    return None if value is None else float(value)


def parity_observations(model, obs_size: int, samples: int, seed: int = 0) -> np.ndarray:
    """Observations drawn like the training data (Gaussian with the normalizer's running
    mean and std), plus the all-zero observation. Far wider draws push the outputs far
    past the action clip, where float32 rounding of both runtimes alone nears 1e-5 and
    the difference says nothing about what the robot would execute."""
    rng = np.random.default_rng(seed)
    normalizer = getattr(model, "obs_normalizer", None)
    mean = getattr(normalizer, "_mean", None)
    if mean is not None:
        centre = mean.detach().numpy().reshape(-1)
        spread = normalizer._std.detach().numpy().reshape(-1)
    else:
        centre, spread = np.zeros(obs_size), np.ones(obs_size)
    obs = centre + spread * rng.standard_normal((samples, obs_size))
    obs[0] = 0.0
    return obs.astype(np.float32)


def export_policy(
    checkpoint_path: str | Path,
    out_path: str | Path,
    samples: int = PARITY_SAMPLES,
    tolerance: float = PARITY_TOLERANCE,
) -> ExportReport:
    import torch

    checkpoint_path, out_path = Path(checkpoint_path), Path(out_path)
    checkpoint = load_checkpoint(checkpoint_path)
    _check_finite(checkpoint["actor_state_dict"], checkpoint_path)
    model = build_actor(checkpoint)
    obs_size = checkpoint["interface"]["observation_size"]
    metadata = policy_metadata(checkpoint, checkpoint_path)
    data, opset = _with_metadata(_to_onnx_bytes(model, obs_size), metadata.to_props())

    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    partial.write_bytes(data)
    try:
        policy = load_policy(partial)
        obs = parity_observations(model, obs_size, samples)
        with torch.no_grad():
            expected = model(torch.from_numpy(obs)).numpy()
        batched = policy.act(obs)
        singles = np.stack([policy.act(o) for o in obs[:10]])  # the robot runs batch 1
        diff = float(max(np.max(np.abs(batched - expected)), np.max(np.abs(singles - expected[:10]))))
        if not np.isfinite(diff) or diff > tolerance:
            raise ExportError(
                f"{out_path}: onnxruntime and torch disagree on {samples} observations: max |diff| "
                f"{diff:.3g} > {tolerance:g}. The file was not written. Fix: report this with the "
                f"checkpoint; check the torch/onnx/onnxruntime versions"
            )
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    policy.path = out_path
    return ExportReport(
        path=out_path,
        policy=policy,
        max_abs_diff=diff,
        samples=samples,
        size_bytes=len(data),
        iteration=int(checkpoint["iteration"]),
        opset=opset,
    )
