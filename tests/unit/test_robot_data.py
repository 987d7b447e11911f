"""Robot data rebuilt from a bag matches what the policy runtime saw and did on the robot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim2real.core.bags import BagWriter, typestore
from sim2real.core.policy_file import load_policy
from sim2real.core.policy_slot import RunningPolicy
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.robot_profile import load_profile
from sim2real.core.shipped_policies import shipped_policy
from sim2real.train.robot_data import RobotBuffer, RobotDataError, find_bags, rebuild_samples

NS = 1_000_000_000
TYPES = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/imu/data": "sensor_msgs/msg/Imu",
    "/cmd_vel": "geometry_msgs/msg/Twist",
    "/policy/joint_commands": "sensor_msgs/msg/JointState",
    "/teleop/joint_commands": "sensor_msgs/msg/JointState",
    "/safety/status": "diagnostic_msgs/msg/DiagnosticArray",
}


class _Seen:
    """The runtime's policy, keeping every observation it was given."""

    def __init__(self, policy):
        self.policy, self.metadata, self.observations = policy, policy.metadata, []

    def act(self, obs):
        self.observations.append(np.array(obs, dtype=np.float32))
        return self.policy.act(obs)


def _header(store, t_ns):
    Time, Header = store.types["builtin_interfaces/msg/Time"], store.types["std_msgs/msg/Header"]
    return Header(stamp=Time(sec=t_ns // NS, nanosec=t_ns % NS), frame_id="")


LATE_IMU_EVERY = 3  # every third tick the runtime has the IMU sample before its state's
LOST_COMMAND = 80  # a tick whose command the recorder lost


def record_runtime(path: Path, seconds: float = 4.0, first_tick: int = 7, active_after_s: float = 1.0):
    """A Go2 walking run as the graph records it: 500 Hz joint states and IMU, /cmd_vel at 10 Hz,
    the runtime's 50 Hz commands (computed here by the runtime's own core objects) stamped with the
    state they answer, the supervisor STANDBY then ACTIVE, and TAKEOVER in the last second with an
    operator's /teleop/joint_commands at 100 Hz. Every LATE_IMU_EVERY-th tick the runtime acts
    before the IMU sample of its state's stamp reaches it (so on the one before); the command of
    tick LOST_COMMAND never reaches the bag; the bag starts at the runtime's tick ``first_tick``
    (its clock's phase is not zero there). Returns the policy, per tick of the bag (what the
    runtime observed, sent, whether the supervisor forwarded it, whether the bag has it), and the
    operator's commands (receive time, targets) in TAKEOVER."""
    store = typestore()
    T = store.types
    policy = load_policy(shipped_policy("go2"))
    profile = load_profile("go2")
    seen = _Seen(policy)
    running = RunningPolicy(seen)
    inputs = RobotInputs(profile)
    rng = np.random.default_rng(3)
    n = profile.num_joints
    takeover_s = seconds - 1.0
    ticks, teleop = [], []
    with BagWriter(path, {"robot": "go2"}) as bag:
        for topic, kind in TYPES.items():
            bag.add_topic(topic, kind)
        for k in range(int(seconds * 500)):
            t = k * NS // 500
            tick = k // 10
            record = tick >= first_tick
            q, dq, quat, gyro = _sensed(k, profile.default_positions, rng)
            imu = _imu(store, t, quat, gyro)
            state = T["sensor_msgs/msg/JointState"](
                header=_header(store, t), name=list(profile.joint_names), position=q, velocity=dq, effort=np.zeros(n)
            )
            late = k % 10 == 0 and tick % LATE_IMU_EVERY == 0 and tick > 0
            if not late:
                inputs.set_imu(quat, gyro)
            inputs.set_joint_states(state.name, q, dq, t)
            if record:
                bag.write("/imu/data", t, imu)
                bag.write("/joint_states", t + 1000, state)
            if k % 50 == 0:  # an operator's joystick at 10 Hz
                _joystick(store, bag if record else None, inputs, t, vx=0.6 if k < 1000 else -0.3)
            mode = "STANDBY" if t < active_after_s * NS else "ACTIVE" if t < takeover_s * NS else "TAKEOVER"
            if k % 100 == 0 and record:
                bag.write("/safety/status", t + 3000, _status(store, t, mode))
            if k % 10 == 0:  # the runtime's tick, on this state
                _, targets = running.step(inputs.signals(t * 1e-9))
                command = _command(store, t, profile, targets)
                if record:
                    if tick != LOST_COMMAND:
                        bag.write("/policy/joint_commands", t + 5000, command)
                    ticks.append(
                        (seen.observations[-1], running.last_action.copy(), mode == "ACTIVE", tick != LOST_COMMAND)
                    )
            if late:
                inputs.set_imu(quat, gyro)
            if mode == "TAKEOVER" and k % 5 == 2:  # the operator's targets at 100 Hz
                targets = profile.default_positions + 0.1 * np.sin(k / 50 + np.arange(n))
                bag.write("/teleop/joint_commands", t + 6000, _command(store, t, profile, targets))
                teleop.append((t + 6000, targets, q))
    return policy, ticks, teleop


def _joystick(store, bag, inputs, t, vx: float) -> None:
    """/cmd_vel (vx, 0, 0.4) to the runtime, and into the bag when it records."""
    inputs.set_velocity_command(vx, 0.0, 0.4, t * 1e-9)
    if bag is not None:
        V3 = store.types["geometry_msgs/msg/Vector3"]
        twist = store.types["geometry_msgs/msg/Twist"](linear=V3(x=vx, y=0.0, z=0.0), angular=V3(x=0.0, y=0.0, z=0.4))
        bag.write("/cmd_vel", t + 2000, twist)


def _sensed(k: int, default, rng):
    """Joint positions and velocities, orientation and rates at 500 Hz step ``k``."""
    n = len(default)
    q = default + 0.2 * np.sin(0.7 * k / 500 + np.arange(n)) + 0.01 * rng.standard_normal(n)
    dq = 0.3 * np.cos(0.7 * k / 500 + np.arange(n)) + 0.05 * rng.standard_normal(n)
    roll, pitch = 0.05 * np.sin(k / 300), 0.03 * np.cos(k / 200)
    quat = np.array([np.sin(roll / 2), np.sin(pitch / 2), 0.0, np.cos(roll / 2) * np.cos(pitch / 2)])
    return q, dq, quat / np.linalg.norm(quat), 0.2 * rng.standard_normal(3)


def _imu(store, t, quat, gyro):
    T = store.types
    return T["sensor_msgs/msg/Imu"](
        header=_header(store, t),
        orientation=T["geometry_msgs/msg/Quaternion"](x=quat[0], y=quat[1], z=quat[2], w=quat[3]),
        orientation_covariance=np.zeros(9),
        angular_velocity=T["geometry_msgs/msg/Vector3"](x=gyro[0], y=gyro[1], z=gyro[2]),
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=9.81),
        linear_acceleration_covariance=np.zeros(9),
    )


def _command(store, t, profile, targets):
    return store.types["sensor_msgs/msg/JointState"](
        header=_header(store, t),
        name=list(profile.joint_names),
        position=targets,
        velocity=np.zeros(0),
        effort=np.zeros(0),
    )


def _status(store, t, mode: str):
    T = store.types
    KV, Status = T["diagnostic_msgs/msg/KeyValue"], T["diagnostic_msgs/msg/DiagnosticStatus"]
    status = Status(
        level=0, name="safety_supervisor: mode", message=mode, hardware_id="", values=[KV(key="mode", value=mode)]
    )
    return T["diagnostic_msgs/msg/DiagnosticArray"](header=_header(store, t), status=[status])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = tmp_path_factory.mktemp("robot") / "walk"
    policy, ticks, teleop = record_runtime(path)
    return path, policy, ticks, teleop


def engaged(ticks):
    """What the runtime observed and sent on the ticks that give samples: forwarded, in the bag,
    after a tick in the bag (the first of the bag, and the first after the lost command, have no
    known last_action)."""
    return [
        (obs, action)
        for i, (obs, action, active, kept) in enumerate(ticks)
        if active and kept and i > 0 and ticks[i - 1][3]
    ]


def test_rebuilt_observations_and_actions_match_the_runtime(recorded):
    path, policy, ticks, _ = recorded
    samples = rebuild_samples(path, policy.metadata, recorded_policy=policy)
    expected = engaged(ticks)
    assert len(samples) == len(expected) > 80
    np.testing.assert_allclose(samples.observations, np.array([o for o, _ in expected]), atol=1e-6)
    np.testing.assert_allclose(samples.actions, np.array([a for _, a in expected]), atol=1e-6)
    assert samples.notes == []


def test_without_the_recorded_policy_the_phase_is_assumed_and_said(recorded):
    path, policy, ticks, _ = recorded
    samples = rebuild_samples(path, policy.metadata)  # the bag's /diagnostics name no policy
    assert any("phase 0" in note for note in samples.notes)
    expected = np.array([o for o, _ in engaged(ticks)])
    slices = policy.metadata.observation_spec.slices()
    assert slices["gait_clock"] == slice(45, 47) and slices["projected_gravity"] == slice(3, 6)
    # The clock is another, and so (the recorded policy not there to tell) are the late IMU samples.
    np.testing.assert_allclose(samples.observations[:, 6:-2], expected[:, 6:-2], atol=1e-6)
    assert np.abs(samples.observations[:, -2:] - expected[:, -2:]).max() > 0.5  # tick 7 is not phase 0
    late = np.abs(samples.observations[:, :6] - expected[:, :6]).max(axis=1) > 1e-6  # rates, gravity
    assert 0.2 < late.mean() < 0.45


def test_an_operator_s_demonstrations_are_taken_once_a_control_period_in_takeover(recorded):
    path, policy, _, teleop = recorded
    meta = policy.metadata
    samples = rebuild_samples(path, meta, demonstrations="teleop")
    taken = teleop[::2]  # 100 Hz: every other one, the first of each control period
    assert len(samples) == len(taken) - 1  # the first one's last_action is not known
    targets = np.array([target for _, target, _ in taken])
    actions = (targets - meta.action_offset) / meta.action_scale
    np.testing.assert_allclose(samples.actions, actions[1:], atol=1e-6)
    slices = meta.observation_spec.slices()
    np.testing.assert_allclose(samples.observations[:, slices["last_action"]], actions[:-1], atol=1e-6)
    # Each with the newest joint state received before it (the one of its own 2 ms step).
    positions = np.array([q for _, _, q in taken]) - meta.default_joint_positions
    np.testing.assert_allclose(samples.observations[:, slices["joint_pos_rel"]], positions[1:], atol=1e-6)


def test_a_buffer_reads_new_bags_and_skips_bad_ones(recorded, tmp_path):
    path, policy, _, _ = recorded
    folder = tmp_path / "buffer"
    folder.mkdir()
    import shutil

    shutil.copytree(path, folder / "first")
    buffer = RobotBuffer(folder, policy.metadata, recorded_policy=policy)
    first = len(buffer.load())
    assert buffer.refresh() == []
    shutil.copytree(path, folder / "second")
    (folder / "broken").mkdir()
    (folder / "broken" / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    assert buffer.refresh() == []  # new files: read once they stop changing
    added = buffer.refresh()
    assert [p.name for p in added] == ["second"]
    assert len(buffer.samples) == 2 * first
    assert len(buffer.skipped) == 1 and "broken" in buffer.skipped[0]
    assert buffer.refresh() == []  # unchanged, it is not tried again
    shutil.rmtree(folder / "broken")
    shutil.copytree(path, folder / "broken")  # whole now (say, a copy that had not finished)
    assert buffer.refresh() == []
    assert [p.name for p in buffer.refresh()] == ["broken"]
    assert len(buffer.samples) == 3 * first


def test_an_operator_s_stream_at_the_control_rate_with_jitter_and_a_pause(tmp_path):
    """50 Hz with every other command 0.1 ms early: one sample a period all the same; a pause
    longer than the supervisor follows a stream (TELEOP_FRESH_S) starts a new segment, whose
    first command gives no sample."""
    store = typestore()
    profile = load_profile("go2")
    policy = load_policy(shipped_policy("go2"))
    rng = np.random.default_rng(0)
    commands = [k * 0.02 - (0.0001 if k % 2 else 0.0) for k in range(40)]  # 0 .. 0.78 s
    commands += [1.1 + k * 0.02 for k in range(20)]  # after a 0.32 s pause
    with BagWriter(tmp_path / "teleop", {"robot": "go2"}) as bag:
        for topic in ("/joint_states", "/imu/data", "/teleop/joint_commands"):
            bag.add_topic(topic, TYPES[topic])
        for k in range(750):  # 1.5 s of sensing at 500 Hz
            t = k * NS // 500
            q, dq, quat, gyro = _sensed(k, profile.default_positions, rng)
            bag.write("/imu/data", t, _imu(store, t, quat, gyro))
            state = _command(store, t, profile, q)
            state.velocity = dq
            bag.write("/joint_states", t + 1000, state)
            for when in commands:
                if t <= round(when * NS) + 5000 < t + NS // 500:
                    bag.write("/teleop/joint_commands", round(when * NS) + 5000, _command(store, t, profile, q))
    samples = rebuild_samples(tmp_path / "teleop", policy.metadata, demonstrations="teleop")
    assert len(samples) == (40 - 1) + (20 - 1)


def test_bags_of_another_robot_or_without_commands_are_refused(recorded, tmp_path):
    path, policy, _, _ = recorded
    panda = load_policy(shipped_policy("panda"))
    with pytest.raises(RobotDataError, match="recorded on robot 'go2'.*panda"):
        rebuild_samples(path, panda.metadata)
    states_only = tmp_path / "states_only"
    with BagWriter(states_only, {"robot": "go2"}) as bag:
        bag.add_topic("/joint_states", TYPES["/joint_states"])
        profile = load_profile("go2")
        bag.write("/joint_states", 0, _command(typestore(), 0, profile, profile.default_positions))
    with pytest.raises(RobotDataError, match="no /policy/joint_commands messages.*record:=DIR"):
        rebuild_samples(states_only, policy.metadata)
    with pytest.raises(RobotDataError, match="holds no rosbag2 bag"):
        (tmp_path / "empty").mkdir()
        RobotBuffer(tmp_path / "empty", policy.metadata).load()
    assert find_bags(path) == [path]
