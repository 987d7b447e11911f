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


def record_runtime(path: Path, seconds: float = 4.0, first_tick: int = 7, active_after_s: float = 1.0):
    """A Go2 walking run as the graph records it: 500 Hz joint states and IMU, /cmd_vel at 10 Hz,
    the runtime's 50 Hz commands (computed here by the runtime's own core objects) stamped with the
    state they answer, the supervisor STANDBY then ACTIVE. The bag starts at the runtime's tick
    ``first_tick`` (its clock's phase is not zero there). Returns what the runtime observed and
    sent per tick, and whether the supervisor forwarded it."""
    store = typestore()
    T = store.types
    policy = load_policy(shipped_policy("go2"))
    profile = load_profile("go2")
    seen = _Seen(policy)
    running = RunningPolicy(seen)
    inputs = RobotInputs(profile)
    rng = np.random.default_rng(3)
    n = profile.num_joints
    ticks = []
    with BagWriter(path, {"robot": "go2"}) as bag:
        for topic, kind in TYPES.items():
            bag.add_topic(topic, kind)
        for k in range(int(seconds * 500)):
            t = k * NS // 500
            record = k // 10 >= first_tick
            q = profile.default_positions + 0.2 * np.sin(0.7 * k / 500 + np.arange(n)) + 0.01 * rng.standard_normal(n)
            dq = 0.3 * np.cos(0.7 * k / 500 + np.arange(n)) + 0.05 * rng.standard_normal(n)
            roll, pitch = 0.05 * np.sin(k / 300), 0.03 * np.cos(k / 200)
            quat = np.array([np.sin(roll / 2), np.sin(pitch / 2), 0.0, np.cos(roll / 2) * np.cos(pitch / 2)])
            quat /= np.linalg.norm(quat)
            gyro = 0.2 * rng.standard_normal(3)
            imu = T["sensor_msgs/msg/Imu"](
                header=_header(store, t),
                orientation=T["geometry_msgs/msg/Quaternion"](x=quat[0], y=quat[1], z=quat[2], w=quat[3]),
                orientation_covariance=np.zeros(9),
                angular_velocity=T["geometry_msgs/msg/Vector3"](x=gyro[0], y=gyro[1], z=gyro[2]),
                angular_velocity_covariance=np.zeros(9),
                linear_acceleration=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=9.81),
                linear_acceleration_covariance=np.zeros(9),
            )
            state = T["sensor_msgs/msg/JointState"](
                header=_header(store, t), name=list(profile.joint_names), position=q, velocity=dq, effort=np.zeros(n)
            )
            inputs.set_imu(quat, gyro)
            inputs.set_joint_states(state.name, q, dq, t)
            if record:
                bag.write("/imu/data", t, imu)
                bag.write("/joint_states", t + 1000, state)
            if k % 50 == 0:  # an operator's joystick at 10 Hz
                vx = 0.6 if k < 1000 else -0.3
                inputs.set_velocity_command(vx, 0.0, 0.4, t * 1e-9)
                if record:
                    V3 = T["geometry_msgs/msg/Vector3"]
                    twist = T["geometry_msgs/msg/Twist"](linear=V3(x=vx, y=0.0, z=0.0), angular=V3(x=0.0, y=0.0, z=0.4))
                    bag.write("/cmd_vel", t + 2000, twist)
            if k % 100 == 0 and record:
                mode = "ACTIVE" if t >= active_after_s * NS else "STANDBY"
                KV, Status = T["diagnostic_msgs/msg/KeyValue"], T["diagnostic_msgs/msg/DiagnosticStatus"]
                status = Status(
                    level=0,
                    name="safety_supervisor: mode",
                    message=mode,
                    hardware_id="",
                    values=[KV(key="mode", value=mode)],
                )
                bag.write(
                    "/safety/status",
                    t + 3000,
                    T["diagnostic_msgs/msg/DiagnosticArray"](header=_header(store, t), status=[status]),
                )
            if k % 10 == 0:  # the runtime's tick, on this state
                _, targets = running.step(inputs.signals(t * 1e-9))
                command = T["sensor_msgs/msg/JointState"](
                    header=_header(store, t),
                    name=list(profile.joint_names),
                    position=targets,
                    velocity=np.zeros(0),
                    effort=np.zeros(0),
                )
                if record:
                    bag.write("/policy/joint_commands", t + 5000, command)
                    ticks.append((seen.observations[-1], running.last_action.copy(), t >= active_after_s * NS))
    return policy, ticks


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = tmp_path_factory.mktemp("robot") / "walk"
    policy, ticks = record_runtime(path)
    return path, policy, ticks


def test_rebuilt_observations_and_actions_match_the_runtime(recorded):
    path, policy, ticks = recorded
    samples = rebuild_samples(path, policy.metadata, recorded_policy=policy)
    # Every engaged command but the bag's first (its previous action was not recorded).
    expected = [(obs, action) for i, (obs, action, active) in enumerate(ticks) if active and i > 0]
    assert len(samples) == len(expected) > 100
    np.testing.assert_allclose(samples.observations, np.array([o for o, _ in expected]), atol=1e-6)
    np.testing.assert_allclose(samples.actions, np.array([a for _, a in expected]), atol=1e-6)
    assert samples.notes == []


def test_without_the_recorded_policy_the_phase_is_assumed_and_said(recorded):
    path, policy, ticks = recorded
    samples = rebuild_samples(path, policy.metadata)
    assert any("phase 0" in note for note in samples.notes)
    clock = [i for i, name in enumerate(policy.metadata.observation_spec.names) if name == "gait_clock"]
    assert clock  # the rest of the observation is unaffected
    expected = np.array([o for i, (o, _, active) in enumerate(ticks) if active and i > 0])
    np.testing.assert_allclose(samples.observations[:, :-2], expected[:, :-2], atol=1e-6)
    assert np.abs(samples.observations[:, -2:] - expected[:, -2:]).max() > 0.5  # tick 7 is not phase 0


def test_a_buffer_reads_new_bags_and_skips_bad_ones(recorded, tmp_path):
    path, policy, _ = recorded
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
    added = buffer.refresh()
    assert [p.name for p in added] == ["second"]
    assert len(buffer.samples) == 2 * first
    assert len(buffer.skipped) == 1 and "broken" in buffer.skipped[0]


def test_bags_of_another_robot_or_without_commands_are_refused(recorded, tmp_path):
    path, policy, _ = recorded
    panda = load_policy(shipped_policy("panda"))
    with pytest.raises(RobotDataError, match="recorded on robot 'go2'.*panda"):
        rebuild_samples(path, panda.metadata)
    with pytest.raises(RobotDataError, match="no /teleop/joint_commands messages.*record:=DIR"):
        rebuild_samples(path, policy.metadata, demonstrations="teleop")
    with pytest.raises(RobotDataError, match="holds no rosbag2 bag"):
        (tmp_path / "empty").mkdir()
        RobotBuffer(tmp_path / "empty", policy.metadata).load()
    assert find_bags(path) == [path]
