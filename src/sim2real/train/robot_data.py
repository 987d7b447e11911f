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
first tick and advances it once a tick. Given the policy that ran (``recorded_policy``, by
default the file the runtime's /diagnostics name), the phase is the one of the clock's
per-tick grid under which that policy repeats the recorded commands best, fitted again after
every gap in the commands; ``gait_phase`` gives it when known (0 for a bag that holds the
runtime's first tick); without either the first command is taken as phase 0, and the samples
say so (``notes``). A command missing from the bag (a skipped tick, a lost message) ends a
segment: the next command gives no sample, its last_action being unknown. A command whose
inputs the bag lacks (no IMU sample yet, a refused joint state) gives no sample either.
"""

from __future__ import annotations

import bisect
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from sim2real.core.bags import BagReadError, bag_information, read_bag
from sim2real.core.errors import InputError
from sim2real.core.failure_bundle import FAILURE_FILE
from sim2real.core.failure_capture import POLICY_STATUS_SUFFIX
from sim2real.core.gait import gait_settings
from sim2real.core.robot_inputs import RobotInputs, missing_inputs
from sim2real.core.supervisor import TELEOP_FRESH_S
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
STAMPED_INPUTS = ("/joint_states", "/imu/data", "/state_estimate")
SLOT_TOLERANCE = 0.1  # of a control period
EARLIER_INPUTS = 1  # IMU samples and estimates before the same stamp a tick may have taken
PHASE_FIT_SAMPLES = 250  # commands the gait phase is fitted on (5 s at 50 Hz)


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

    time: float  # s: the command's stamp (the runtime's) or its receipt (an operator's)
    signals: list[Any]  # the inputs it may have answered, likeliest first ([]: one was missing)
    action: np.ndarray
    forwarded: Optional[bool]  # None: the bag has no supervisor status


@dataclass
class _Recording:
    ticks: list[_Tick]
    mode_known: bool  # the bag has the supervisor's status
    policy_path: Optional[str] = None  # the runtime's policy file, from its /diagnostics
    policy_sha256: Optional[str] = None


@dataclass
class _Sample:
    tick: int  # index into the ticks
    previous: int  # the tick whose command is its last_action
    clock: int  # control periods since its segment's first tick
    segment: int


def rebuild_samples(
    path: str | Path,
    policy: Any,
    demonstrations: str = "policy",
    recorded_policy: Any = None,
    gait_phase: Optional[float] = None,
) -> RobotSamples:
    """The samples of one bag in the layout of ``policy`` (a :class:`PolicyMetadata`).

    ``recorded_policy``: the :class:`PolicyFile` that ran while the bag was recorded (default: the
    file the runtime's /diagnostics name, if it is here with the same sha256 and the same
    observation and action contract); it fits the gait phase and tells which IMU sample each tick
    took. ``gait_phase``: the clock's phase at the bag's first command, when known (a bag that
    holds the runtime's first tick: 0)."""
    from sim2real.core.robot_profile import load_profile

    if demonstrations not in DEMONSTRATION_TOPICS:
        raise ValueError(f"demonstrations must be one of {sorted(DEMONSTRATION_TOPICS)}, got {demonstrations!r}")
    path = Path(path)
    recorded_on = bag_robot(path)
    if recorded_on is not None and recorded_on != policy.robot:
        raise RobotDataError(
            path, f"recorded on robot {recorded_on!r}, the policy is for {policy.robot!r}", "use bags of this robot"
        )
    recording = _read_ticks(path, policy, load_profile(policy.robot), demonstrations)
    notes: list[str] = []
    if not recording.mode_known:
        notes.append(f"{path.name}: no /safety/status: every command counted as reaching the robot")
    if demonstrations != "policy":
        recorded_policy = None  # an operator's commands: no policy to reproduce
    elif recorded_policy is None:
        recorded_policy = _policy_file(recording.policy_path, recording.policy_sha256)
    if recorded_policy is not None and not same_contract(recorded_policy.metadata, policy):
        notes.append(f"{path.name}: the policy that ran observes or acts otherwise than the one trained")
        recorded_policy = None
    try:
        rebuild = _Rebuild(policy, recording.ticks, demonstrations, recorded_policy, gait_phase)
        observations, actions = rebuild.samples()
    except ValueError as exc:  # a term the policy observes that the bag cannot give
        raise RobotDataError(path, str(exc), "record the inputs this policy observes") from None
    notes += [f"{path.name}: {note}" for note in rebuild.notes]
    return RobotSamples(observations, actions, [str(path)], notes)


def same_contract(a: Any, b: Any) -> bool:
    """Two policies' metadata observe the same terms at the same scales, map actions alike and run
    the same gait clock: one's observations and actions are the other's."""
    return (
        a.observation_spec.to_metadata() == b.observation_spec.to_metadata()
        and a.action_clip == b.action_clip
        and np.allclose(a.action_scale, b.action_scale)
        and np.allclose(a.action_offset, b.action_offset)
        and np.allclose(a.default_joint_positions, b.default_joint_positions)
        and a.control_period == b.control_period
        and gait_settings(a.task_config) == gait_settings(b.task_config)
    )


class _Rebuild:
    """The observations and actions of a bag's ticks.

    The ticks fall into segments of consecutive control periods: a command missing from the bag
    (a tick the runtime skipped, a message the recorder lost) starts a new one, whose first tick
    gives no sample (its last_action is not known). The gait clock advances a step per control
    period within a segment; its phase at a segment's start is fitted with the recorded policy,
    else carried on from the bag's first command (taken as phase 0) by the time elapsed."""

    def __init__(self, policy, ticks: list[_Tick], demonstrations: str, recorded_policy, gait_phase):
        self.policy, self.ticks, self.recorded = policy, ticks, recorded_policy
        self.demonstrations = demonstrations
        self.period = float(policy.control_period)
        self.ranges = TrainedRanges.of(policy.task_config)
        self.notes: list[str] = []
        clock = gait_settings(policy.task_config) if "gait_clock" in policy.observation_spec.names else None
        self.step = 0.0 if clock is None else float(clock["frequency"]) * self.period
        self.segments, self.slots = self._segments()
        self.rows = [s for s in self._all_samples() if ticks[s.tick].signals and ticks[s.tick].forwarded is not False]
        self.phase0 = self._phases(gait_phase) if clock is not None else None

    def _segments(self) -> tuple[list[list[int]], list[list[int]]]:
        """The ticks in segments, and each kept tick's control period since its segment began.

        The runtime's commands: a segment ends where a command is missing (a gap over 1.5
        periods); each command is a period. An operator's: a segment ends where the stream paused
        long enough for the supervisor to stop following it (TELEOP_FRESH_S); within one, the
        first command of each control period is kept, as the policy would have acted once a period."""
        teleop = self.demonstrations == "teleop"
        gap = TELEOP_FRESH_S if teleop else 1.5 * self.period
        segments: list[list[int]] = []
        slots: list[list[int]] = []
        start = previous = 0.0
        for i, tick in enumerate(self.ticks):
            if not segments or tick.time - previous > gap:
                segments.append([])
                slots.append([])
                start = tick.time
            previous = tick.time
            # A command a little early for its period (a stream at the control rate, with jitter)
            # still opens that period.
            slot = int((tick.time - start) / self.period + SLOT_TOLERANCE) if teleop else len(segments[-1])
            if slots[-1] and slot <= slots[-1][-1]:
                continue  # a second command within one period
            segments[-1].append(i)
            slots[-1].append(slot)
        return segments, slots

    def _all_samples(self) -> list[_Sample]:
        return [
            _Sample(segment[k], segment[k - 1], self.slots[number][k], number)
            for number, segment in enumerate(self.segments)
            for k in range(1, len(segment))
        ]

    def _phases(self, gait_phase: Optional[float]) -> list[float]:
        """The clock's phase at each segment's first tick."""
        first = self.ticks[self.segments[0][0]].time if self.segments else 0.0
        carried = [
            ((gait_phase or 0.0) + round((self.ticks[segment[0]].time - first) / self.period) * self.step) % 1.0
            for segment in self.segments
        ]
        if gait_phase is not None:
            return carried
        if self.recorded is None:
            self.notes.append("gait clock taken at phase 0 on the first command (no recorded policy to fit it)")
            return carried
        by_segment: dict[int, list[_Sample]] = {}
        for row in self.rows:
            by_segment.setdefault(row.segment, []).append(row)
        return [self._fit_phase(by_segment.get(number, [])) for number in range(len(self.segments))]

    def _fit_phase(self, rows: list[_Sample]) -> float:
        """The phase at a segment's start under which the recorded policy repeats the recorded
        commands of ``rows`` best: searched on the clock's per-tick grid (where a clock started at
        0 can be), then on a grid ten times finer around the best (a clock set by a hot-swap can
        be anywhere)."""
        rows = rows[:PHASE_FIT_SAMPLES]
        if not rows or self.step <= 0:
            return 0.0
        recorded = np.array([self.ticks[r.tick].action for r in rows])

        def error(phase0: float) -> float:
            obs = np.array([self._observe(r, 0, phase0 % 1.0) for r in rows])
            return float(np.mean(_action_errors(self.recorded, obs, recorded) ** 2))

        grid = [k * self.step for k in range(max(1, round(1.0 / self.step)))]
        best = min(grid, key=error)
        finer = [best + self.step * k / 10 for k in range(-5, 6)]
        return min(finer, key=error) % 1.0

    def _observe(self, row: _Sample, choice: int, phase0: Optional[float] = None) -> np.ndarray:
        if phase0 is None and self.phase0 is not None:
            phase0 = self.phase0[row.segment]
        signals, _ = self.ranges.clamp(self.ticks[row.tick].signals[choice])
        signals = replace(
            signals,
            last_action=np.asarray(self.ticks[row.previous].action, dtype=float),
            default_joint_position=np.asarray(self.policy.default_joint_positions, dtype=float),
            gait_phase=None if phase0 is None else (phase0 + row.clock * self.step) % 1.0,
        )
        return self.policy.observation_spec.observe(signals)

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self.rows
        observations = np.array([self._observe(r, 0) for r in rows], np.float32).reshape(
            len(rows), self.policy.observation_size
        )
        actions = np.array([self.ticks[r.tick].action for r in rows], np.float32).reshape(
            len(rows), self.policy.num_joints
        )
        if self.recorded is not None:
            self._take_likeliest_inputs(observations, actions)
        finite = np.all(np.isfinite(observations), axis=1) & np.all(np.isfinite(actions), axis=1)
        if not np.all(finite):
            self.notes.append(f"{int((~finite).sum())} samples with NaN or inf left out")
        return observations[finite], actions[finite]

    def _take_likeliest_inputs(self, observations: np.ndarray, actions: np.ndarray) -> None:
        """Per tick, of the inputs it may have answered, those under which the recorded policy
        sends the recorded command (in place; the first when none is closer)."""
        errors = _action_errors(self.recorded, observations, actions)
        for choice in range(1, 1 + EARLIER_INPUTS):
            rows = [j for j, r in enumerate(self.rows) if len(self.ticks[r.tick].signals) > choice and errors[j] > 0]
            if not rows:
                continue
            other = np.array([self._observe(self.rows[j], choice) for j in rows], np.float32)
            other_errors = _action_errors(self.recorded, other, actions[rows])
            better = other_errors < errors[rows]
            observations[np.array(rows)[better]] = other[better]
            errors[rows] = np.minimum(errors[rows], other_errors)


def _action_errors(recorded_policy, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Per observation: the largest difference between the recorded policy's action and ``actions``."""
    if not len(observations):
        return np.zeros(0)
    predicted = np.asarray(recorded_policy.act(np.asarray(observations, np.float32)), dtype=float)
    clip = recorded_policy.metadata.action_clip
    if clip is not None:
        predicted = np.clip(predicted, -clip, clip)
    return np.abs(predicted - actions).max(axis=1)


def _read_ticks(path: Path, policy, profile, demonstrations: str) -> _Recording:
    """Each command of the demonstration stream with the inputs it answered.

    A runtime's command answers the joint state of its stamp, and takes the IMU sample and the
    state estimate newest at its tick: the ones of the same stamp, or (when they reached the
    runtime a moment after the joint state) the ones before. The bag cannot tell which; both
    are kept, the same stamp's first. They are found by their stamps anywhere in the bag: a
    recorder's receive times do not keep the order of messages on different topics exactly (in
    lockstep they are mapped onto the sim clock). An operator's command is taken with the newest
    inputs received before it."""
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
    by_stamp = {
        name: _ByStamp(sorted(((_stamp_ns(m), m) for t, _, m in messages if t == name), key=lambda item: item[0]))
        for name in STAMPED_INPUTS
    }
    reader = _TickReader(path, policy, profile, demonstrations, "/safety/status" in seen, by_stamp)
    for name, received_ns, msg in messages:
        reader.message(name, received_ns * 1e-9, msg)
    return _Recording(reader.ticks, reader.mode_known, reader.policy_path, reader.policy_sha256)


class _TickReader:
    """The robot's inputs as a bag's messages bring them in, and a tick per demonstrated command."""

    def __init__(
        self, path: Path, policy, profile, demonstrations: str, mode_known: bool, by_stamp: dict[str, "_ByStamp"]
    ):
        self.path, self.policy, self.demonstrations = path, policy, demonstrations
        self.topic = DEMONSTRATION_TOPICS[demonstrations]
        self.inputs = RobotInputs(profile)
        self.scale = np.asarray(policy.action_scale, dtype=float)
        self.offset = np.asarray(policy.action_offset, dtype=float)
        self.by_stamp = by_stamp  # every stamped input of the bag, by stamp
        self.received: dict[str, deque] = {t: deque(maxlen=1) for t in STAMPED_INPUTS}  # the newest so far
        self.mode: Optional[str] = None
        self.mode_known = mode_known
        self.ticks: list[_Tick] = []
        self.policy_path: Optional[str] = None
        self.policy_sha256: Optional[str] = None

    def message(self, name: str, now: float, msg: Any) -> None:
        if name in self.received:
            self.received[name].append(msg)
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
        # The runtime's command answers the state of its stamp; an operator's, the newest state.
        stamp = _stamp_ns(msg) if self.demonstrations == "policy" else None
        candidates = []  # a tick all the same when an input is missing: the clock counts it
        for earlier in range(0, EARLIER_INPUTS + 1) if stamp is not None else (0,):
            if stamp is None:
                found = {t: (q[-1] if q else None) for t, q in self.received.items()}
            else:
                found = {
                    t: index.at_or_before(stamp, earlier if t != "/joint_states" else 0)
                    for t, index in self.by_stamp.items()
                }
            if _take_inputs(self.inputs, found, earlier):
                signals = self.inputs.signals(now)
                if self._complete(signals):
                    candidates.append(signals)
        try:
            target = _in_order(msg, list(self.policy.joint_names))
        except ValueError as exc:
            raise RobotDataError(
                self.path, f"{self.topic}: {exc}", "record the commands of this robot's joints"
            ) from None
        forwarded = None if not self.mode_known else self.mode == FORWARDING_MODE[self.demonstrations]
        time = stamp * 1e-9 if stamp is not None else now
        self.ticks.append(_Tick(time, candidates, (target - self.offset) / self.scale, forwarded))

    def _complete(self, signals: Any) -> bool:
        """The bag gave every input the policy observes (what the sample adds itself aside)."""
        n = len(self.policy.joint_names)
        probe = replace(signals, last_action=np.zeros(n), default_joint_position=np.zeros(n), gait_phase=0.0)
        return not missing_inputs(self.policy.observation_spec, probe)


def _take_inputs(inputs: RobotInputs, found: dict[str, Any], earlier: int = 0) -> bool:
    """Load ``found``'s joint state, IMU sample and estimate into ``inputs``; False without a
    joint state the runtime would take (or, for an ``earlier`` candidate, without its IMU sample)."""
    state = found["/joint_states"]
    if state is None:
        return False
    try:
        inputs.set_joint_states(state.name, state.position, state.velocity, _stamp_ns(state))
    except ValueError:
        return False  # a state the runtime refuses too (a joint missing, arrays that do not match)
    imu = found["/imu/data"]
    if earlier and imu is None:
        return False
    if imu is not None:
        o, w = imu.orientation, imu.angular_velocity
        try:
            inputs.set_imu((o.x, o.y, o.z, o.w), (w.x, w.y, w.z))
        except ValueError:
            pass  # refused as the runtime refuses it: the previous sample stays
    estimate = found["/state_estimate"]
    if estimate is not None:
        v = estimate.twist.twist.linear
        inputs.set_state_estimate((v.x, v.y, v.z), None)
    return True


class _ByStamp:
    """A topic's messages sorted by header stamp."""

    def __init__(self, items: list[tuple[int, Any]]):
        self.stamps = [stamp for stamp, _ in items]
        self.messages = [message for _, message in items]

    def at_or_before(self, stamp: int, earlier: int = 0) -> Any:
        """The message ``earlier`` places before the newest one stamped at or before ``stamp``."""
        i = bisect.bisect_right(self.stamps, stamp) - earlier
        return self.messages[i - 1] if i >= 1 else None


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


def _file_sizes(bag: Path) -> tuple | None:
    try:
        return tuple(sorted((p.name, p.stat().st_size) for p in bag.iterdir() if p.is_file()))
    except OSError:  # gone or moved since it was found
        return None


class RobotBuffer:
    """Robot data from bags, failure bundles or folders of them (``roots``: one or several),
    re-read when new bags appear (:meth:`refresh`, between training iterations). A new bag is read
    once it is whole: its metadata.yaml there (a recorder writes it as it closes the bag), and its
    files the same size at two refreshes in a row (a bag being copied in is not read half-way)."""

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
        self._sizes: dict[Path, tuple | None] = {}  # a new bag's file sizes at the last refresh
        self._failed: dict[Path, tuple | None] = {}  # a bag that could not be used, and its sizes then
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
            new = [
                b
                for root in self.roots
                for b in find_bags(root)
                if b.resolve() not in self._read
                and (b.resolve() not in self._failed or self._failed[b.resolve()] != _file_sizes(b))
            ]
        except RobotDataError as exc:
            self.skipped.append(str(exc))
            return []
        added = []
        for bag in new:
            sizes = _file_sizes(bag)
            if sizes is None or self._sizes.get(bag.resolve()) != sizes:
                self._sizes[bag.resolve()] = sizes  # new or still growing: read at a later refresh
                continue
            try:
                self._add(bag)
                added.append(bag)
            except Exception as exc:  # whatever the file holds, the run goes on without it (tried again if it changes)
                self._failed[bag.resolve()] = sizes
                self.skipped.append(
                    str(exc) if isinstance(exc, RobotDataError) else f"{bag}: {type(exc).__name__}: {exc}"
                )
        return added

    def _add(self, bag: Path) -> None:
        recorded = self.recorded_policy if self.recorded_policy is not None else recorded_policy_of(bag)
        part = rebuild_samples(bag, self.policy, self.demonstrations, recorded_policy=recorded)
        self._read.add(bag.resolve())
        self._parts.append(part)
        self.samples = RobotSamples.join(self._parts, self.policy.observation_size, self.policy.num_joints)
