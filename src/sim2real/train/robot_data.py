"""Robot data for training: the observations a policy saw on the robot, and the actions it was shown.

A bag recorded through the graph (``record:=DIR``, a failure bundle, any rosbag2 with the
graph's topics) holds the robot's inputs and the commands that drove it, not the policy's
observation vectors. This module rebuilds those vectors with the observation spec of the policy
being trained, the way the policy runtime builds them (:class:`sim2real.core.robot_inputs.RobotInputs`,
the trained command ranges, the gait clock, the previous action), one sample per command of the
demonstration stream:

- ``policy``: ``/policy/joint_commands``, the runtime's own ticks (a supervised run: what a
  good policy did on this robot). Each command is stamped with the state it answers; the
  joint state, IMU sample and state estimate of that stamp make its observation.
- ``teleop``: ``/teleop/joint_commands``, an operator's targets in TAKEOVER (demonstrations),
  taken at most once per control period, each with the newest state received before it.

A sample's action is the command as the policy's action (``(target - offset) / scale``); its
``last_action`` term is the previous command's. Only commands that reached the robot count:
``policy`` samples while the supervisor was ACTIVE, ``teleop`` samples while it was in
TAKEOVER (``/safety/status``; a bag without it keeps every sample, and says so).

The gait clock is the one input no topic carries: the runtime starts it at phase 0 on its
first tick and advances it once a tick. A bag holding the runtime's first tick
(``gait_phase=0``) needs nothing more; otherwise, given the policy that ran
(``recorded_policy``), the phase is the one of the clock's per-tick grid under which that
policy reproduces the recorded commands best; without either the first command is taken as
phase 0, and the samples say so (``notes``).
"""

from __future__ import annotations

import bisect
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from sim2real.core.bags import BagReadError, bag_information, read_bag
from sim2real.core.errors import InputError
from sim2real.core.failure_capture import POLICY_STATUS_SUFFIX
from sim2real.core.gait import gait_settings
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.trained_ranges import TrainedRanges

DEMONSTRATION_TOPICS = {"policy": "/policy/joint_commands", "teleop": "/teleop/joint_commands"}
# The supervisor mode in which each stream's commands reach the robot.
FORWARDING_MODE = {"policy": "ACTIVE", "teleop": "TAKEOVER"}
STATE_TOPICS = (
    "/joint_states",
    "/imu/data",
    "/state_estimate",
    "/cmd_vel",
    "/goal_pose",
    "/safety/status",
    "/diagnostics",
)
RECENT = 256  # stamped messages kept to match a command's stamp (0.5 s at 500 Hz)
STAMPED_INPUTS = ("/joint_states", "/imu/data", "/state_estimate")
EARLIER_INPUTS = 1  # IMU samples and estimates before the same stamp a tick may have taken
PHASE_FIT_SAMPLES = 250  # commands the gait phase is fitted on (5 s at 50 Hz)
FAILURE_FILE = "failure.json"


class RobotDataError(InputError):
    """Robot data that cannot be read or used; names the bag, the problem and the fix."""

    def __init__(self, path: str | Path, problem: str, fix: str):
        super().__init__(f"{path}: {problem}. Fix: {fix}")
        self.path = Path(path)


@dataclass
class RobotSamples:
    """Observations in the policy's layout and the actions demonstrated on them."""

    observations: np.ndarray  # (N, observation size) float32
    actions: np.ndarray  # (N, joints) float32
    bags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the rebuild had to assume

    def __len__(self) -> int:
        return len(self.observations)

    @staticmethod
    def join(parts: Sequence["RobotSamples"], observation_size: int, joints: int) -> "RobotSamples":
        if not parts:
            return RobotSamples(np.zeros((0, observation_size), np.float32), np.zeros((0, joints), np.float32))
        return RobotSamples(
            np.concatenate([p.observations for p in parts]),
            np.concatenate([p.actions for p in parts]),
            [b for p in parts for b in p.bags],
            [n for p in parts for n in p.notes],
        )


def find_bags(root: str | Path) -> list[Path]:
    """The rosbag2 directories at or under ``root`` (a bag, a failure bundle, or a folder of them),
    sorted by path; RobotDataError if there is nothing there at all."""
    root = Path(root).expanduser()
    if not root.exists():
        raise RobotDataError(root, "no such file or directory", "give a bag, a failure bundle or a folder of them")
    if (root / "metadata.yaml").is_file() or root.suffix == ".mcap":
        return [root if root.is_dir() else root.parent]
    return sorted(p.parent for p in root.rglob("metadata.yaml"))


def bag_robot(path: Path) -> Optional[str]:
    """The robot a bag says it was recorded on (its custom_data, or a bundle's failure.json)."""
    custom = bag_information(path).get("custom_data") or {}
    if custom.get("robot"):
        return str(custom["robot"])
    try:
        return json.loads((path / FAILURE_FILE).read_text()).get("robot")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class _Tick:
    """One demonstrated command with the robot's inputs it answered."""

    signals: list[Any]  # the inputs it may have answered, likeliest first (see _read_ticks)
    action: np.ndarray
    forwarded: Optional[bool]  # None: the bag has no supervisor status


@dataclass
class _Recording:
    ticks: list[_Tick]
    mode_known: bool  # the bag has the supervisor's status
    policy_path: Optional[str] = None  # the runtime's policy file, from its /diagnostics
    policy_sha256: Optional[str] = None


def rebuild_samples(
    path: str | Path,
    policy: Any,
    demonstrations: str = "policy",
    recorded_policy: Any = None,
    gait_phase: Optional[float] = None,
) -> RobotSamples:
    """The samples of one bag in the layout of ``policy`` (a :class:`PolicyMetadata`).

    ``recorded_policy``: the :class:`PolicyFile` that ran while the bag was recorded (default: the
    file the runtime's /diagnostics name, if it is here with the same sha256); it fits the gait
    phase and tells which IMU sample each tick took. ``gait_phase``: the clock's phase at the
    bag's first command, when known."""
    from sim2real.core.robot_profile import load_profile

    if demonstrations not in DEMONSTRATION_TOPICS:
        raise ValueError(f"demonstrations must be one of {sorted(DEMONSTRATION_TOPICS)}, got {demonstrations!r}")
    path = Path(path)
    recorded_on = bag_robot(path)
    if recorded_on is not None and recorded_on != policy.robot:
        raise RobotDataError(
            path, f"recorded on robot {recorded_on!r}, the policy is for {policy.robot!r}", "use bags of this robot"
        )
    profile = load_profile(policy.robot)
    recording = _read_ticks(path, policy, profile, demonstrations)
    ticks = recording.ticks
    if recorded_policy is None and demonstrations == "policy":
        recorded_policy = _policy_file(recording.policy_path, recording.policy_sha256)
    if recorded_policy is not None and recorded_policy.metadata.observation_spec.names != policy.observation_spec.names:
        recorded_policy = None  # another layout: its observations cannot be rebuilt with this spec
    notes: list[str] = []
    if not recording.mode_known:
        notes.append(f"{path.name}: no /safety/status: every command counted as reaching the robot")
    clock = gait_settings(policy.task_config) if "gait_clock" in policy.observation_spec.names else None
    step = 0.0 if clock is None else float(clock["frequency"]) * float(policy.control_period)
    if clock is not None and gait_phase is None:
        if recorded_policy is not None and demonstrations == "policy":
            gait_phase = _fit_gait_phase(ticks, policy, recorded_policy, step)
        else:
            gait_phase = 0.0
            notes.append(f"{path.name}: gait clock taken at phase 0 on the first command (no recorded policy given)")
    ranges = TrainedRanges.of(policy.task_config)
    kept = [
        i
        for i, tick in enumerate(ticks)
        if i > 0 and tick.forwarded is not False  # the first command's previous action is not in the bag
    ]
    observations = np.zeros((len(kept), policy.observation_size), np.float32)
    for row, i in enumerate(kept):
        observations[row] = _observe(policy, ranges, ticks[i].signals[0], ticks[i - 1].action, gait_phase, step, i)
    if recorded_policy is not None and demonstrations == "policy":
        _take_likeliest_inputs(observations, kept, ticks, policy, ranges, recorded_policy, gait_phase, step)
    actions = np.array([ticks[i].action for i in kept], np.float32).reshape(len(kept), policy.num_joints)
    if not np.all(np.isfinite(observations)) or not np.all(np.isfinite(actions)):
        finite = np.all(np.isfinite(observations), axis=1) & np.all(np.isfinite(actions), axis=1)
        notes.append(f"{path.name}: {int((~finite).sum())} samples with NaN or inf left out")
        observations, actions = observations[finite], actions[finite]
    return RobotSamples(observations, actions, [str(path)], notes)


def _take_likeliest_inputs(observations, kept, ticks, policy, ranges, recorded_policy, phase0, step) -> None:
    """Per tick, of the inputs it may have answered, those under which the recorded policy sends
    the recorded command (in place; the first when none is closer)."""
    errors = _action_errors(recorded_policy, observations, np.array([ticks[i].action for i in kept]))
    for choice in range(1, max((len(t.signals) for t in ticks), default=1)):
        rows = [r for r, i in enumerate(kept) if len(ticks[i].signals) > choice and errors[r] > 0.0]
        if not rows:
            continue
        other = np.array(
            [
                _observe(
                    policy, ranges, ticks[kept[r]].signals[choice], ticks[kept[r] - 1].action, phase0, step, kept[r]
                )
                for r in rows
            ],
            np.float32,
        )
        other_errors = _action_errors(recorded_policy, other, np.array([ticks[kept[r]].action for r in rows]))
        better = other_errors < errors[rows]
        for j in np.nonzero(better)[0]:
            observations[rows[j]] = other[j]
            errors[rows[j]] = other_errors[j]


def _action_errors(recorded_policy, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Per observation: the largest difference between the recorded policy's action and ``actions``."""
    if not len(observations):
        return np.zeros(0)
    predicted = np.asarray(recorded_policy.act(np.asarray(observations, np.float32)), dtype=float)
    clip = recorded_policy.metadata.action_clip
    if clip is not None:
        predicted = np.clip(predicted, -clip, clip)
    return np.abs(predicted - actions).max(axis=1)


def _observe(policy, ranges: TrainedRanges, signals: Any, last_action, phase0, step: float, index: int) -> np.ndarray:
    signals, _ = ranges.clamp(signals)
    signals = replace(
        signals,
        last_action=np.asarray(last_action, dtype=float),
        default_joint_position=np.asarray(policy.default_joint_positions, dtype=float),
        gait_phase=None if phase0 is None else (phase0 + index * step) % 1.0,
    )
    return policy.observation_spec.observe(signals)


def _fit_gait_phase(ticks: list[_Tick], policy, recorded_policy, step: float) -> float:
    """The phase at the first command under which ``recorded_policy`` repeats the recorded
    commands best, searched on the clock's per-tick grid (a tick advances it by ``step``)."""
    ranges = TrainedRanges.of(policy.task_config)
    sample = list(range(1, min(len(ticks), PHASE_FIT_SAMPLES + 1)))
    if not sample:
        return 0.0
    recorded = np.array([ticks[i].action for i in sample])
    grid = max(1, round(1.0 / step)) if step > 0 else 1
    errors = []
    for k in range(grid):
        phase0 = (k * step) % 1.0
        obs = np.array(
            [_observe(policy, ranges, ticks[i].signals[0], ticks[i - 1].action, phase0, step, i) for i in sample]
        )
        errors.append(float(np.mean(_action_errors(recorded_policy, obs, recorded) ** 2)))
    return (int(np.argmin(errors)) * step) % 1.0


def _read_ticks(path: Path, policy, profile, demonstrations: str) -> _Recording:
    """Each command of the demonstration stream with the inputs it answered.

    A runtime's command answers the joint state of its stamp, and takes the IMU sample and the
    state estimate newest at its tick: the ones of the same stamp, or (when they reached the
    runtime a moment after the joint state) the ones before. The bag cannot tell which; both
    are kept, the same stamp's first. An operator's command is taken with the newest inputs."""
    topic = DEMONSTRATION_TOPICS[demonstrations]
    try:
        messages = list(read_bag(path, (*STATE_TOPICS, topic)))
    except BagReadError as exc:
        raise RobotDataError(path, str(exc), "record it again, or leave it out of the robot data") from None
    seen = {name for name, _, _ in messages}
    for needed in ("/joint_states", topic):
        if needed not in seen:
            raise RobotDataError(
                path,
                f"no {needed} messages (it has {sorted(seen)})",
                "record through the graph with record:=DIR (or use a failure bundle), which keeps "
                "/joint_states, /imu/data, /cmd_vel and the policy's and the operator's commands",
            )
    reader = _TickReader(path, policy, profile, demonstrations, mode_known="/safety/status" in seen)
    for name, received_ns, msg in messages:
        reader.message(name, received_ns * 1e-9, msg)
    return _Recording(reader.ticks, reader.mode_known, reader.policy_path, reader.policy_sha256)


class _TickReader:
    """The robot's inputs as a bag's messages bring them in, and a tick per demonstrated command."""

    def __init__(self, path: Path, policy, profile, demonstrations: str, mode_known: bool):
        self.path, self.policy, self.demonstrations = path, policy, demonstrations
        self.topic = DEMONSTRATION_TOPICS[demonstrations]
        self.inputs = RobotInputs(profile)
        self.scale = np.asarray(policy.action_scale, dtype=float)
        self.offset = np.asarray(policy.action_offset, dtype=float)
        self.stamped: dict[str, deque] = {t: deque(maxlen=RECENT) for t in STAMPED_INPUTS}  # (stamp ns, message)
        self.mode: Optional[str] = None
        self.mode_known = mode_known
        self.ticks: list[_Tick] = []
        self.policy_path: Optional[str] = None
        self.policy_sha256: Optional[str] = None
        self.last_teleop = -np.inf

    def message(self, name: str, now: float, msg: Any) -> None:
        if name in self.stamped:
            self.stamped[name].append((_stamp_ns(msg), msg))
        elif name == "/diagnostics" and self.policy_path is None:
            self.policy_path, self.policy_sha256 = _running_policy(msg)
        elif name == "/cmd_vel":
            with contextlib.suppress(ValueError):  # the runtime refuses it too: the previous command goes on
                self.inputs.set_velocity_command(msg.linear.x, msg.linear.y, msg.angular.z, now)
        elif name == "/goal_pose":
            p = msg.pose.position
            with contextlib.suppress(ValueError):
                self.inputs.set_goal((p.x, p.y, p.z), msg.header.frame_id)
        elif name == "/safety/status":
            self.mode = _supervisor_mode(msg) or self.mode
        elif name == self.topic:
            self.command(now, msg)

    def command(self, now: float, msg: Any) -> None:
        if self.demonstrations == "teleop":
            if now - self.last_teleop < 0.999 * self.policy.control_period:
                return  # one demonstration a control period, as the policy would act
            self.last_teleop = now
        # The runtime's command answers the state of its stamp; an operator's, the newest state.
        stamp = _stamp_ns(msg) if self.demonstrations == "policy" else None
        if not _take_inputs(self.inputs, self.stamped, stamp):
            return
        candidates = [self.inputs.signals(now)]
        for earlier in range(1, EARLIER_INPUTS + 1) if stamp is not None else ():
            if _take_inputs(self.inputs, self.stamped, stamp, earlier):
                candidates.append(self.inputs.signals(now))
        try:
            target = _in_order(msg, list(self.policy.joint_names))
        except ValueError as exc:
            raise RobotDataError(
                self.path, f"{self.topic}: {exc}", "record the commands of this robot's joints"
            ) from None
        forwarded = None if not self.mode_known else self.mode == FORWARDING_MODE[self.demonstrations]
        self.ticks.append(_Tick(candidates, (target - self.offset) / self.scale, forwarded))


def _take_inputs(inputs: RobotInputs, stamped: dict[str, deque], stamp: Optional[int], earlier: int = 0) -> bool:
    """Load into ``inputs`` the newest joint state stamped at or before ``stamp`` (None: the newest
    received), and the IMU sample and estimate ``earlier`` before the newest so stamped; False
    when there is no joint state yet (or no IMU sample that early)."""
    state = _at_or_before(stamped["/joint_states"], stamp)
    if state is None:
        return False
    inputs.set_joint_states(state.name, state.position, state.velocity, _stamp_ns(state))
    imu = _at_or_before(stamped["/imu/data"], stamp, earlier)
    if earlier and imu is None:
        return False
    if imu is not None:
        o, w = imu.orientation, imu.angular_velocity
        try:
            inputs.set_imu((o.x, o.y, o.z, o.w), (w.x, w.y, w.z))
        except ValueError:
            pass  # refused as the runtime refuses it: the previous sample stays
    estimate = _at_or_before(stamped["/state_estimate"], stamp, earlier)
    if estimate is not None:
        v = estimate.twist.twist.linear
        inputs.set_state_estimate((v.x, v.y, v.z), None)
    return True


def _at_or_before(recent: Iterable, stamp: Optional[int], earlier: int = 0):
    """The message ``earlier`` places before the newest one stamped at or before ``stamp``."""
    items = sorted(recent, key=lambda item: item[0]) if stamp is not None else list(recent)
    if stamp is None:
        return items[-1 - earlier][1] if len(items) > earlier else None
    i = bisect.bisect_right([s for s, _ in items], stamp) - earlier
    return items[i - 1][1] if i >= 1 else None


def _in_order(msg, names: list[str]) -> np.ndarray:
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ValueError(f"a command lacks joints {missing}")
    if len(msg.position) != len(msg.name):
        raise ValueError(f"a command has {len(msg.position)} positions for {len(msg.name)} joints")
    return np.array([msg.position[index[n]] for n in names], dtype=float)


def _stamp_ns(msg) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _running_policy(msg) -> tuple[Optional[str], Optional[str]]:
    """The policy file and sha256 a runtime's /diagnostics status reports, if this message has it."""
    for status in msg.status:
        if status.name.endswith(POLICY_STATUS_SUFFIX):
            values = {kv.key: kv.value for kv in status.values}
            if values.get("policy_path"):
                return values["policy_path"], values.get("sha256")
    return None, None


def _policy_file(path: Optional[str], sha256: Optional[str]) -> Any:
    """The policy at ``path`` if it is still the file of that sha256, else None."""
    from sim2real.core.policy_file import load_policy

    if not path:
        return None
    try:
        policy = load_policy(path)
    except Exception:  # gone, moved or another file: the caller says what it assumed instead
        return None
    return policy if sha256 in (None, "", policy.sha256) else None


def _supervisor_mode(msg) -> Optional[str]:
    for status in msg.status:
        if status.name.startswith("safety_supervisor"):
            values = {kv.key: kv.value for kv in status.values}
            return values.get("mode", status.message)
    return None


def recorded_policy_of(path: Path) -> Any:
    """The policy a failure bundle says ran (its file, if it is still there with the same sha256)."""
    try:
        entry = json.loads((path / FAILURE_FILE).read_text()).get("policy") or {}
    except (OSError, ValueError):
        return None
    return _policy_file(entry.get("path"), entry.get("sha256")) if isinstance(entry, dict) else None


class RobotBuffer:
    """Robot data from bags, failure bundles or folders of them (``roots``: one or several),
    re-read when new bags appear (:meth:`refresh`, between training iterations). A bag is read
    once it is complete (its metadata.yaml is written as the recorder closes it)."""

    def __init__(
        self,
        roots: str | Path | Sequence[str | Path],
        policy: Any,
        demonstrations: str = "policy",
        recorded_policy: Any = None,
    ):
        roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
        self.roots = [Path(r).expanduser() for r in roots]
        self.root = ", ".join(str(r) for r in self.roots)  # as it is named to people
        self.policy = policy
        self.demonstrations = demonstrations
        self.recorded_policy = recorded_policy
        self._read: set[Path] = set()
        self._parts: list[RobotSamples] = []
        self.samples = RobotSamples.join([], policy.observation_size, policy.num_joints)
        self.skipped: list[str] = []  # bags found later that could not be used, with the reason

    def load(self) -> RobotSamples:
        """Read every bag there now; RobotDataError if one cannot be used or none gives a sample."""
        bags = [bag for root in self.roots for bag in find_bags(root)]
        if not bags:
            raise RobotDataError(
                self.root, "holds no rosbag2 bag", "record one through the graph (record:=DIR) or give a failure bundle"
            )
        for bag in bags:
            self._add(bag)
        if not len(self.samples):
            raise RobotDataError(
                self.root,
                f"its {len(bags)} bag(s) hold no {self.demonstrations} command that reached the robot "
                f"(supervisor {FORWARDING_MODE[self.demonstrations]})",
                "record while the policy runs engaged (or the operator teleoperates in TAKEOVER)",
            )
        return self.samples

    def refresh(self) -> list[Path]:
        """Read the bags that appeared since the last read; a bag that cannot be used is skipped
        with the reason (:attr:`skipped`), so a bad file dropped in the folder never stops a run."""
        try:
            new = [b for root in self.roots for b in find_bags(root) if b.resolve() not in self._read]
        except RobotDataError as exc:
            self.skipped.append(str(exc))
            return []
        added = []
        for bag in new:
            try:
                self._add(bag)
                added.append(bag)
            except (RobotDataError, ValueError) as exc:
                self._read.add(bag.resolve())
                self.skipped.append(str(exc))
        return added

    def _add(self, bag: Path) -> None:
        recorded = self.recorded_policy if self.recorded_policy is not None else recorded_policy_of(bag)
        part = rebuild_samples(bag, self.policy, self.demonstrations, recorded_policy=recorded)
        self._read.add(bag.resolve())
        self._parts.append(part)
        self.samples = RobotSamples.join(self._parts, self.policy.observation_size, self.policy.num_joints)
