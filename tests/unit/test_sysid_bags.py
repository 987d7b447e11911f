"""Sysid bags: written as standard rosbag2 + MCAP (rosbags and mcap readers open them), read
back into time-aligned arrays, and bad bags refused with a message naming the problem."""

import json
import shutil

import numpy as np
import pytest
from mcap.reader import make_reader

from sim2real.core.bags import TYPESTORE, BagSalvagedWarning, BagWriteError, BagWriter
from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.dataset import COMMANDS, JOINT_STATE_TYPE, STATES, BagError, BagTopics, read_bag, read_bags
from sim2real.sysid.excitation import make_excitation
from sim2real.sysid.metadata import profile_hash
from sim2real.sysid.sim_recording import joint_state_message, record_in_sim


@pytest.fixture(scope="module")
def panda():
    return load_profile("panda")


@pytest.fixture(scope="module")
def sim_bag(tmp_path_factory, panda):
    excitation = make_excitation(panda, "chirp", duration=5.0, ramp=1.0)
    return record_in_sim(
        panda, excitation, tmp_path_factory.mktemp("bags") / "sim", PhysicalConditions(joint_position_noise=0.001)
    )


def test_sim_bag_reads_into_aligned_arrays_with_metadata(sim_bag, panda):
    segment = read_bag(sim_bag, panda)
    n = panda.num_joints
    assert segment.q.shape == segment.dq.shape == segment.effort.shape and segment.q.shape[1] == n
    assert segment.t[0] == 0.0 and np.all(np.diff(segment.t) > 0)
    assert segment.sample_period == pytest.approx(panda.sensing_period, rel=1e-6)
    assert np.median(np.diff(segment.command_t)) == pytest.approx(panda.policy_period, rel=1e-6)
    assert segment.metadata["robot"] == "panda"
    assert segment.metadata["robot_profile_sha256"] == profile_hash(panda)
    assert segment.metadata["excitation"]["kind"] == "chirp"
    assert "recorded_utc" in segment.metadata


def test_bags_say_whether_the_robot_hung_on_a_stand_and_are_not_mixed(tmp_path):
    go2 = load_profile("go2")
    excitation = make_excitation(go2, "chirp", duration=3.0, ramp=1.0)
    hanging = record_in_sim(go2, excitation, tmp_path / "hanging", suspended=True)
    standing = record_in_sim(go2, excitation, tmp_path / "standing")
    assert read_bags([hanging], go2).suspended and not read_bags([standing], go2).suspended
    with pytest.raises(BagError, match="recorded standing, while .*hanging was recorded on a stand") as info:
        read_bags([hanging, standing], go2)
    assert "fit the bags recorded on the stand and those recorded standing separately" in str(info.value)
    # An arm's bag that claims a stand (edited metadata, a hand-started logger) is refused before any fit.
    panda = load_profile("panda")
    arm = record_in_sim(panda, make_excitation(panda, "chirp", duration=3.0, ramp=1.0), tmp_path / "arm")
    metadata = arm / "metadata.yaml"
    metadata.write_text(metadata.read_text().replace("suspended: 'false'", "suspended: 'true'"))
    with pytest.raises(BagError, match="has a fixed base"):
        read_bags([arm], panda)


def test_bag_opens_with_the_mcap_reader_and_is_standard_rosbag2(sim_bag):
    files = list(sim_bag.glob("*.mcap"))
    assert len(files) == 1 and (sim_bag / "metadata.yaml").is_file()
    with files[0].open("rb") as stream:
        reader = make_reader(stream)
        topics = {channel.topic for _, channel, _ in reader.iter_messages()}
        schemas = {s.name for s in reader.get_summary().schemas.values()}
    assert topics == {STATES, COMMANDS}
    assert schemas == {JOINT_STATE_TYPE}
    text = (sim_bag / "metadata.yaml").read_text()
    assert "storage_identifier: mcap" in text and "custom_data" in text


def _bag(path, panda, states=50, commands=5, names=None, topics=(STATES, COMMANDS), nan_states=(), metadata=None):
    names = names or panda.joint_names
    with BagWriter(path, {"robot": "panda", **(metadata or {})}) as bag:
        for topic in topics:
            bag.add_topic(topic, JOINT_STATE_TYPE)
        for k in range(states if STATES in topics else 0):
            position = panda.default_positions.copy()
            if k in nan_states:
                position[2] = np.nan
            bag.write(
                STATES,
                k * 2_000_000,
                joint_state_message(names, k * 2_000_000, position, np.zeros(len(names)), np.zeros(len(names))),
            )
        for k in range(commands if COMMANDS in topics else 0):  # moving: an excitation, however small
            bag.write(
                COMMANDS,
                k * 20_000_000,
                joint_state_message(names, k * 20_000_000, panda.default_positions + 0.05 * np.sin(k)),
            )
    return path


def test_missing_topic_is_named(tmp_path, panda):
    with pytest.raises(BagError, match=r"no topic /joint_commands \(it has \['/joint_states'\]\)"):
        read_bag(_bag(tmp_path / "b", panda, topics=(STATES,)), panda)


def test_joint_names_not_matching_the_profile(tmp_path, panda):
    renamed = [f"arm_{n}" for n in panda.joint_names]
    with pytest.raises(BagError, match="lack the profile's joints"):
        read_bag(_bag(tmp_path / "b", panda, names=renamed), panda)


def test_bag_of_another_robot(sim_bag):
    with pytest.raises(BagError, match="lack the profile's joints"):
        read_bag(sim_bag, load_profile("go2"))


def test_empty_bag(tmp_path, panda):
    with pytest.raises(BagError, match="only 0 /joint_states messages"):
        read_bag(_bag(tmp_path / "b", panda, states=0, commands=0), panda)


def test_a_few_nan_states_are_left_out_and_many_refused(tmp_path, panda):
    """One encoder glitch must not end the fit in a traceback (every cost would be NaN)."""
    segment = read_bag(_bag(tmp_path / "few", panda, states=100, nan_states=(10, 11)), panda)
    assert len(segment.t) == 98 and np.all(np.isfinite(segment.q))
    with pytest.raises(BagError, match="20 of 100 /joint_states messages hold NaN or infinite values"):
        read_bag(_bag(tmp_path / "many", panda, states=100, nan_states=range(20)), panda)


def test_an_aborted_recording_is_refused_with_its_reason(tmp_path, panda):
    aborted = {"completed": "false", "aborted": "the supervisor left ACTIVE (TAKEOVER) during chirp"}
    with pytest.raises(BagError, match=r"excitation was aborted \(the supervisor left ACTIVE .*record it again"):
        read_bag(_bag(tmp_path / "b", panda, metadata=aborted), panda)


def test_a_driver_that_does_not_stamp_its_states_is_told_so(tmp_path, panda):
    path = tmp_path / "unstamped"
    with BagWriter(path, {"robot": "panda"}) as bag:
        for topic in (STATES, COMMANDS):
            bag.add_topic(topic, JOINT_STATE_TYPE)
        for k in range(100):  # received at 500 Hz, every header.stamp zero
            bag.write(
                STATES,
                k * 2_000_000,
                joint_state_message(panda.joint_names, 0, panda.default_positions, np.zeros(7), np.zeros(7)),
            )
        bag.write(COMMANDS, 0, joint_state_message(panda.joint_names, 0, panda.default_positions))
    with pytest.raises(BagError, match="100 of 100 /joint_states messages carry a zero header.stamp"):
        read_bag(path, panda)


def test_states_and_commands_on_different_clocks_are_told_so(tmp_path, panda):
    path = tmp_path / "clocks"
    with BagWriter(path, {"robot": "panda"}) as bag:
        for topic in (STATES, COMMANDS):
            bag.add_topic(topic, JOINT_STATE_TYPE)
        for k in range(100):  # the driver's clock: 100 s since boot; the supervisor's: the epoch
            t_state, t_command = 100 * 10**9 + k * 2_000_000, 1_700_000_000 * 10**9 + k * 2_000_000
            bag.write(
                STATES,
                k,
                joint_state_message(panda.joint_names, t_state, panda.default_positions, np.zeros(7), np.zeros(7)),
            )
            bag.write(COMMANDS, k, joint_state_message(panda.joint_names, t_command, panda.default_positions))
    with pytest.raises(BagError, match="do not overlap: the driver and the computer running the supervisor"):
        read_bag(path, panda)


def test_a_truncated_bag_is_read_as_far_as_it_goes_and_says_what_it_lost(tmp_path, sim_bag, panda):
    """A recorder killed mid-write leaves an MCAP with no index: the messages before the cut
    are read (a warning counts the lost ones); a bag with nothing whole left is refused."""
    whole = read_bag(sim_bag, panda)
    copy = tmp_path / "truncated"
    shutil.copytree(sim_bag, copy)
    data = next(copy.glob("*.mcap"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.warns(BagSalvagedWarning, match=r"messages lost \(/joint_commands \d+, /joint_states \d+"):
        part = read_bag(copy, panda)
    assert 0.3 * len(whole.t) < len(part.t) < 0.7 * len(whole.t)
    np.testing.assert_array_equal(part.q, whole.q[: len(part.t)])  # the same messages, in order
    assert part.metadata["excitation"]["kind"] == "chirp"  # custom data from metadata.yaml
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(BagError, match="nothing could be recovered"):
        read_bag(copy, panda)
    (copy / "metadata.yaml").unlink()  # a recorder killed mid-write never wrote it
    with pytest.raises(BagError, match="has no metadata.yaml .* whether it completed are unknown"):
        read_bag(copy, panda)


def test_not_a_bag(tmp_path, panda):
    with pytest.raises(BagError, match="no metadata.yaml"):
        read_bag(tmp_path, panda)
    with pytest.raises(BagError, match="no such file"):
        read_bag(tmp_path / "absent", panda)


def test_writer_never_overwrites_and_checks_metadata(tmp_path, panda):
    _bag(tmp_path / "b", panda)
    with pytest.raises(BagWriteError, match="exists already"):
        BagWriter(tmp_path / "b")
    with pytest.raises(BagWriteError, match="must be strings"):
        BagWriter(tmp_path / "c", {"excitation": {"kind": "chirp"}})
    assert json.loads(json.dumps({"ok": True}))


def _as_other_recorder(source, path, command_type, zero_state_stamps=False):
    """The sim bag re-recorded as another robot's stack would: states on /joint_states (maybe
    unstamped), commands on a ros2_control controller's topic as ``command_type``."""
    from rosbags.highlevel import AnyReader

    types = TYPESTORE.types
    topic = {
        "Float64MultiArray": "/forward_position_controller/commands",
        "JointTrajectory": "/joint_trajectory_controller/joint_trajectory",
    }[command_type]
    with AnyReader([source]) as reader, BagWriter(path, {"robot": "panda"}) as bag:
        bag.add_topic(STATES, JOINT_STATE_TYPE)
        bag.add_topic(
            topic,
            {
                "Float64MultiArray": "std_msgs/msg/Float64MultiArray",
                "JointTrajectory": "trajectory_msgs/msg/JointTrajectory",
            }[command_type],
        )
        for connection, t, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            if connection.topic == STATES:
                if zero_state_stamps:
                    msg.header.stamp.sec, msg.header.stamp.nanosec = 0, 0
                bag.write(STATES, t, msg)
            elif connection.topic == COMMANDS and command_type == "Float64MultiArray":
                layout = types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
                bag.write(topic, t, types["std_msgs/msg/Float64MultiArray"](layout=layout, data=msg.position))
            elif connection.topic == COMMANDS:
                point = types["trajectory_msgs/msg/JointTrajectoryPoint"](
                    positions=msg.position,
                    velocities=msg.velocity,
                    accelerations=np.zeros(0),
                    effort=np.zeros(0),
                    time_from_start=types["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
                )
                bag.write(
                    topic,
                    t,
                    types["trajectory_msgs/msg/JointTrajectory"](
                        header=msg.header, joint_names=list(msg.name), points=[point]
                    ),
                )
    return path, topic


@pytest.mark.parametrize("command_type", ["Float64MultiArray", "JointTrajectory"])
def test_a_ros2_control_robots_bag_is_read_with_its_topics_and_types(tmp_path, sim_bag, panda, command_type):
    ours = read_bag(sim_bag, panda)
    bag, topic = _as_other_recorder(sim_bag, tmp_path / "other", command_type)
    with pytest.raises(BagError, match="no topic /joint_commands .*--commands TOPIC:TYPE"):
        read_bag(bag, panda)
    with pytest.raises(BagError, match=f"use --commands {topic}:{command_type}"):
        read_bag(bag, panda, BagTopics(commands=topic))
    theirs = read_bag(bag, panda, BagTopics(commands=topic, command_type=command_type))
    np.testing.assert_array_equal(theirs.command_q, ours.command_q)
    np.testing.assert_array_equal(theirs.q, ours.q)
    if command_type == "JointTrajectory":  # stamped: the same times
        np.testing.assert_allclose(theirs.command_t, ours.command_t, atol=1e-9)


def test_unstamped_states_are_refused_unless_timed_by_receipt(tmp_path, sim_bag, panda):
    bag, topic = _as_other_recorder(sim_bag, tmp_path / "unstamped", "Float64MultiArray", zero_state_stamps=True)
    topics = BagTopics(commands=topic, command_type="Float64MultiArray")
    with pytest.raises(BagError, match="carry a zero header.stamp .*fit with --stamps receive"):
        read_bag(bag, panda, topics)
    segment = read_bag(bag, panda, BagTopics(commands=topic, command_type="Float64MultiArray", stamps="receive"))
    assert len(segment.t) == len(read_bag(sim_bag, panda).t)


def test_a_bag_without_excitation_is_refused(tmp_path, panda):
    path = tmp_path / "still"
    with BagWriter(path, {"robot": "panda"}) as bag:
        bag.add_topic(STATES, JOINT_STATE_TYPE)
        bag.add_topic(COMMANDS, JOINT_STATE_TYPE)
        for k in range(100):
            bag.write(
                STATES,
                k * 2_000_000,
                joint_state_message(
                    panda.joint_names, k * 2_000_000, panda.default_positions, np.zeros(7), np.zeros(7)
                ),
            )
            bag.write(
                COMMANDS, k * 2_000_000, joint_state_message(panda.joint_names, k * 2_000_000, panda.default_positions)
            )
    with pytest.raises(BagError, match="never move .* holds no excitation"):
        read_bag(path, panda)


def test_an_unknown_command_type_or_stamp_source_is_named():
    with pytest.raises(BagError, match="command type 'Twist' is not one the fit reads"):
        BagTopics(command_type="Twist")
    with pytest.raises(BagError, match="stamps 'clock' is unknown"):
        BagTopics(stamps="clock")
