"""The deployed policy file: one ONNX model whose metadata says how to run it.

**Contract** (``sim2real.policy/1``): one self-contained ``.onnx`` file (no external
weight files), input ``obs`` float32 ``[batch, observation_size]``, output ``actions``
float32 ``[batch, num_joints]``, and string ``metadata_props``:

=================================  =====================================================
key                                value
=================================  =====================================================
sim2real.format                    ``sim2real.policy/1``
sim2real.robot                     robot profile name (``go2``)
sim2real.task                      task name (``walk``)
sim2real.joint_names               JSON list, the profile's joint order = action order
sim2real.observation_terms         :meth:`ObservationSpec.to_metadata` JSON
sim2real.observation_size          integer
sim2real.action_scale              JSON list per joint
sim2real.action_offset             JSON list per joint (rad)
sim2real.action_clip               JSON number or null: actions are clipped to +-clip
sim2real.default_joint_positions   JSON list per joint (rad)
sim2real.control_period            s between two policy steps
sim2real.kp / sim2real.kd          JSON lists per joint (PD gains of the position targets)
sim2real.task_config               JSON object the task was trained with
sim2real.training_config           JSON object (PPO, networks, ADR, curriculum settings)
sim2real.randomization             JSON object (the final randomization, YAML format)
sim2real.actuator                  JSON object: the actuator model trained with (PD rate, limits)
sim2real.world                     JSON object: the nominal simulated world (engine, step, friction)
sim2real.difficulty                JSON number or null: the curriculum difficulty reached
sim2real.robot_model               JSON object: the URDF trained on (file name, sha256)
sim2real.source_commit             git commit of the code that trained it, or "unknown"
sim2real.source_dirty              "true" / "false" / "unknown": uncommitted changes
sim2real.export_time               ISO 8601 UTC
sim2real.checkpoint                the checkpoint it was exported from (informational)
=================================  =====================================================

The joint target the runtime sends is ``action_offset + action_scale * clip(actions)``.
``docs/policy_format.md`` defines every key, observation term and the step in full.
:func:`load_policy` reads and checks a file with onnxruntime only (no torch, no onnx
package, no ROS), so the robot computer needs nothing else to run it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from sim2real.core.errors import InputError
from sim2real.core.observation import ObservationSpec

FORMAT_VERSION = "sim2real.policy/1"
PREFIX = "sim2real."
INPUT_NAME = "obs"
OUTPUT_NAME = "actions"

# The runtime cannot run a policy without these; the provenance keys default to "unknown".
REQUIRED_KEYS = (
    "format",
    "robot",
    "task",
    "joint_names",
    "observation_terms",
    "observation_size",
    "action_scale",
    "action_offset",
    "action_clip",
    "default_joint_positions",
    "control_period",
    "kp",
    "kd",
)
PROVENANCE_KEYS = (
    "task_config",
    "training_config",
    "randomization",
    "source_commit",
    "source_dirty",
    "export_time",
    "checkpoint",
    "actuator",
    "world",
    "difficulty",
    "robot_model",
)
# Written only when known: files exported before these keys existed lack them.
OPTIONAL_JSON_KEYS = ("actuator", "world", "difficulty", "robot_model")


class PolicyFileError(InputError):
    """A policy file that cannot be run, with the file and the reason in the message."""

    def __init__(self, path: str | Path, problem: str, fix: str = "re-export it with `sim2real export CHECKPOINT`"):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}. Fix: {fix}")


@dataclass(frozen=True)
class PolicyMetadata:
    robot: str
    task: str
    joint_names: tuple[str, ...]
    observation_spec: ObservationSpec
    action_scale: np.ndarray
    action_offset: np.ndarray
    action_clip: float | None
    default_joint_positions: np.ndarray
    control_period: float
    kp: np.ndarray
    kd: np.ndarray
    task_config: dict = field(default_factory=dict)
    training_config: dict = field(default_factory=dict)
    randomization: dict | None = None
    source_commit: str = "unknown"
    source_dirty: str = "unknown"
    export_time: str = "unknown"
    checkpoint: str = "unknown"
    actuator: dict | None = None
    world: dict | None = None
    difficulty: float | None = None
    robot_model: dict | None = None
    format: str = FORMAT_VERSION

    @property
    def observation_size(self) -> int:
        return self.observation_spec.size

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    def joint_targets(self, actions: np.ndarray) -> np.ndarray:
        """Joint position targets (rad) for a policy output, the way the task applied them."""
        a = np.asarray(actions, dtype=float)
        if self.action_clip is not None:
            a = np.clip(a, -self.action_clip, self.action_clip)
        return self.action_offset + self.action_scale * a

    def to_props(self) -> dict[str, str]:
        """The ``metadata_props`` strings of this metadata (what the exporter writes)."""
        values: dict[str, Any] = {
            "format": self.format,
            "robot": self.robot,
            "task": self.task,
            "joint_names": list(self.joint_names),
            "observation_terms": self.observation_spec.to_metadata(),
            "observation_size": self.observation_size,
            "action_scale": self.action_scale.tolist(),
            "action_offset": self.action_offset.tolist(),
            "action_clip": self.action_clip,
            "default_joint_positions": self.default_joint_positions.tolist(),
            "control_period": self.control_period,
            "kp": self.kp.tolist(),
            "kd": self.kd.tolist(),
            "task_config": self.task_config,
            "training_config": self.training_config,
            "randomization": self.randomization,
            "source_commit": self.source_commit,
            "source_dirty": self.source_dirty,
            "export_time": self.export_time,
            "checkpoint": self.checkpoint,
        }
        values.update({key: getattr(self, key) for key in OPTIONAL_JSON_KEYS if getattr(self, key) is not None})
        return {PREFIX + key: value if isinstance(value, str) else json.dumps(value) for key, value in values.items()}

    @classmethod
    def from_props(cls, props: dict[str, str], path: str | Path = "<policy>") -> "PolicyMetadata":
        return _MetadataReader(props, path).read()

    def mismatches(self, robot: str, joint_names: list[str] | tuple[str, ...], control_period: float) -> list[str]:
        """Why this policy cannot run on a robot (empty: it can)."""
        problems = []
        if robot != self.robot:
            problems.append(f"trained for robot {self.robot!r}, the running robot is {robot!r}")
        if tuple(joint_names) != self.joint_names:
            problems.append(f"joint order {list(self.joint_names)} differs from the robot's {list(joint_names)}")
        if not math.isclose(control_period, self.control_period, rel_tol=1e-6):
            problems.append(f"control period {self.control_period} s differs from the robot's {control_period} s")
        return problems


class _MetadataReader:
    def __init__(self, props: dict[str, str], path: str | Path):
        self.props = props
        self.path = path

    def fail(self, problem: str, fix: str = "re-export it with `sim2real export CHECKPOINT`") -> PolicyFileError:
        return PolicyFileError(self.path, problem, fix)

    def raw(self, key: str) -> str:
        return self.props[PREFIX + key]

    def json(self, key: str) -> Any:
        try:
            return json.loads(self.raw(key))
        except json.JSONDecodeError as exc:
            raise self.fail(f"metadata {PREFIX}{key} is not valid JSON ({exc})") from None

    @overload
    def number(self, key: str, positive: bool = False, allow_null: Literal[False] = False) -> float: ...

    @overload
    def number(self, key: str, positive: bool = False, *, allow_null: bool) -> float | None: ...

    def number(self, key: str, positive: bool = False, allow_null: bool = False) -> float | None:
        value = self.json(key)
        if value is None and allow_null:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or (positive and value <= 0)
        ):
            raise self.fail(
                f"metadata {PREFIX}{key} must be a finite{' positive' if positive else ''} number, "
                f"got {self.raw(key)!r}"
            )
        return float(value)

    def vector(self, key: str, n: int) -> np.ndarray:
        value = self.json(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value] * n  # a scalar applies to every joint
        try:
            array = np.array(value, dtype=float)
        except (TypeError, ValueError):
            array = np.array([])
        if array.shape != (n,) or not np.all(np.isfinite(array)):
            raise self.fail(f"metadata {PREFIX}{key} must be {n} finite numbers (one per joint), got {self.raw(key)!r}")
        return array

    def _format(self) -> str:
        if PREFIX + "format" not in self.props:
            raise self.fail(
                f"no {PREFIX}format metadata: not a sim2real policy file "
                f"(metadata keys present: {sorted(self.props) or 'none'})"
            )
        version = self.raw("format")
        if version != FORMAT_VERSION:
            raise self.fail(
                f"policy format {version!r} is not supported (this code reads {FORMAT_VERSION!r})",
                "export the policy with a matching sim2real version",
            )
        return version

    def _observation_spec(self) -> ObservationSpec:
        try:
            spec = ObservationSpec.from_metadata(self.raw("observation_terms"))
        except ValueError as exc:
            raise self.fail(f"metadata {PREFIX}observation_terms: {exc}") from None
        size = self.json("observation_size")
        if size != spec.size:
            raise self.fail(
                f"metadata {PREFIX}observation_size is {size!r} but the observation terms add up to {spec.size}"
            )
        return spec

    def _provenance(self) -> dict[str, Any]:
        """The optional keys: where the policy came from and what it was trained on."""
        provenance: dict[str, Any] = {}
        for key in ("task_config", "training_config", "randomization"):
            if PREFIX + key in self.props:
                provenance[key] = self.json(key)
        for key in ("source_commit", "source_dirty", "export_time", "checkpoint"):
            if PREFIX + key in self.props:
                provenance[key] = self.raw(key)
        for key in ("actuator", "world", "robot_model"):
            if PREFIX + key in self.props:
                value = self.json(key)
                if value is not None and not isinstance(value, dict):
                    raise self.fail(f"metadata {PREFIX}{key} must be a JSON object, got {self.raw(key)!r}")
                provenance[key] = value
        if PREFIX + "difficulty" in self.props:
            provenance["difficulty"] = self.number("difficulty", allow_null=True)
        return provenance

    def read(self) -> PolicyMetadata:
        version = self._format()
        missing = [PREFIX + k for k in REQUIRED_KEYS if PREFIX + k not in self.props]
        present = [k for k in REQUIRED_KEYS if PREFIX + k in self.props]
        written_later = [k for k in self.props if k.startswith(PREFIX) and k[len(PREFIX) :] not in REQUIRED_KEYS]
        if missing and present == list(REQUIRED_KEYS[: len(present)]) and not written_later:
            # The metadata is the file's last part, the required entries first (to_props): a file
            # cut short between two of them still parses, with only the first ones.
            raise self.fail(
                f"missing metadata {', '.join(missing)}: the file holds only part of its metadata, "
                "as a file cut short in copying does",
                "copy it again (compare its sha256 with the original's), or re-export it with "
                "`sim2real export CHECKPOINT`",
            )
        if missing:
            raise self.fail(f"missing metadata {', '.join(missing)}")
        names = self.json("joint_names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise self.fail(f"metadata {PREFIX}joint_names must be a non-empty JSON list of strings")
        n = len(names)
        spec = self._observation_spec()
        provenance = self._provenance()
        clip = self.number("action_clip", positive=True, allow_null=True)
        return PolicyMetadata(
            robot=self.raw("robot"),
            task=self.raw("task"),
            joint_names=tuple(names),
            observation_spec=spec,
            action_scale=self.vector("action_scale", n),
            action_offset=self.vector("action_offset", n),
            action_clip=clip,
            default_joint_positions=self.vector("default_joint_positions", n),
            control_period=self.number("control_period", positive=True),
            kp=self.vector("kp", n),
            kd=self.vector("kd", n),
            format=version,
            **provenance,
        )


@dataclass
class PolicyFile:
    """A loaded, checked policy: the onnxruntime session, its metadata and the file's sha256."""

    path: Path
    sha256: str
    metadata: PolicyMetadata
    session: Any
    signer: Any = None  # policy_signing.Verified when loaded against trusted keys, else None

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for one observation ``[obs_size]`` or a batch ``[B, obs_size]`` (same shape rank back)."""
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        batch = x.reshape(1, -1) if single else x
        if batch.shape[-1] != self.metadata.observation_size:
            raise ValueError(
                f"observation has {batch.shape[-1]} values, the policy expects {self.metadata.observation_size}"
            )
        actions = self.session.run([OUTPUT_NAME], {INPUT_NAME: batch})[0]
        return actions[0] if single else actions

    def check_profile(self, profile: Any) -> None:
        """Refuse a robot profile (name, joint_names, policy_period) this policy was not trained for."""
        problems = self.metadata.mismatches(profile.name, profile.joint_names, profile.policy_period)
        if problems:
            raise PolicyFileError(self.path, "; ".join(problems), "use a policy trained for this robot profile")


def load_policy(
    path: str | Path, threads: int = 1, *, max_bytes: int | None = None, trusted_keys: Any = None
) -> PolicyFile:
    """Load a policy file, check its graph signature and metadata, and open a CPU session.

    ``threads``: onnxruntime intra-op threads; 1 is fastest for a batch-1 MLP (~10 us)
    and leaves the other cores to the control loop. ``max_bytes``: refuse a larger file
    before reading it (a 500 MB file takes seconds to read). ``trusted_keys``: a
    :class:`sim2real.core.policy_signing.TrustedKeys`; the file runs only if its signature
    verifies, checked on the very bytes that are then loaded.
    """
    import onnxruntime as ort

    path = Path(path)
    try:
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise PolicyFileError(
                path,
                f"{size / 1e6:.1f} MB is larger than the {max_bytes / 1e6:.1f} MB allowed (parameter max_policy_mb)",
                "a policy MLP is well under 10 MB: check the file, or raise max_policy_mb",
            )
        with open(path, "rb") as file:  # bounded: a FIFO, or a file growing after the stat, says size 0
            data = file.read() if max_bytes is None else file.read(max_bytes + 1)
    except OSError as exc:
        raise PolicyFileError(path, f"cannot read the file ({exc.strerror or exc})", "check the path") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise PolicyFileError(
            path,
            f"larger than the {max_bytes / 1e6:.1f} MB allowed (parameter max_policy_mb)",
            "check the file, or raise max_policy_mb",
        )
    signer = None
    if trusted_keys is not None:
        from sim2real.core.policy_signing import SignatureError

        try:
            signer = trusted_keys.verify(path, data)
        except SignatureError as exc:
            raise PolicyFileError(
                path,
                f"refused by trusted_keys: {exc}",
                "run only policies signed with a trusted key (sim2real policy verify FILE --trusted-keys DIR)",
            ) from None
    digest = hashlib.sha256(data).hexdigest()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # the reason is reported in our error, not on stderr
    try:
        # From the bytes just hashed: the sha256 names exactly what runs.
        session = ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types per failure
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        if "external" in reason.lower() or ".data" in reason:
            raise PolicyFileError(
                path,
                f"weights are stored outside the file ({reason})",
                "a policy must be one file: re-export it with `sim2real export`",
            ) from None
        raise PolicyFileError(
            path,
            f"not a valid ONNX model ({reason})",
            "the file is corrupt or not ONNX: re-export it with `sim2real export`",
        ) from None
    try:
        props = dict(session.get_modelmeta().custom_metadata_map)
    except UnicodeDecodeError as exc:  # onnxruntime decodes the strings itself
        raise PolicyFileError(
            path,
            f"metadata is not valid UTF-8 ({exc.reason} at byte {exc.start}): the file is corrupt",
            "copy it again, or re-export it with `sim2real export`",
        ) from None
    metadata = PolicyMetadata.from_props(props, path)
    _check_signature(session, metadata, path)
    return PolicyFile(path=path, sha256=digest, metadata=metadata, session=session, signer=signer)


def _check_signature(session: Any, metadata: PolicyMetadata, path: Path) -> None:
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if [i.name for i in inputs] != [INPUT_NAME] or OUTPUT_NAME not in [o.name for o in outputs]:
        raise PolicyFileError(
            path,
            f"graph must have the single input {INPUT_NAME!r} and an output "
            f"{OUTPUT_NAME!r}; it has inputs {[i.name for i in inputs]} and outputs "
            f"{[o.name for o in outputs]}",
        )
    shape = inputs[0].shape
    if len(shape) != 2 or shape[1] != metadata.observation_size:
        raise PolicyFileError(
            path, f"input {INPUT_NAME!r} has shape {shape}, metadata says [batch, {metadata.observation_size}]"
        )
    output = next(o for o in outputs if o.name == OUTPUT_NAME)
    if len(output.shape) != 2 or output.shape[1] != metadata.num_joints:
        raise PolicyFileError(
            path, f"output {OUTPUT_NAME!r} has shape {output.shape}, metadata lists {metadata.num_joints} joints"
        )
