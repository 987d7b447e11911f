"""Sysid bags: written as standard rosbag2 + MCAP (rosbags and mcap readers open them), read
back into time-aligned arrays, and bad bags refused with a message naming the problem."""
import json
import shutil

import numpy as np
import pytest
from mcap.reader import make_reader

from sim2real.core.robot_profile import load_profile
from sim2real.core.bags import BagWriteError, BagWriter
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.dataset import COMMANDS, JOINT_STATE_TYPE, STATES, BagError, read_bag
from sim2real.sysid.excitation import make_excitation
from sim2real.sysid.metadata import profile_hash
from sim2real.sysid.sim_recording import joint_state_message, record_in_sim


@pytest.fixture(scope="module")
def panda():
    return load_profile("panda")


@pytest.fixture(scope="module")
def sim_bag(tmp_path_factory, panda):
    excitation = make_excitation(panda, "chirp", duration=5.0, ramp=1.0)
    return record_in_sim(panda, excitation, tmp_path_factory.mktemp("bags") / "sim",
                         PhysicalConditions(joint_position_noise=0.001))


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


def _bag(path, panda, states=50, commands=5, names=None, topics=(STATES, COMMANDS)):
    names = names or panda.joint_names
    with BagWriter(path, {"robot": "panda"}) as bag:
        for topic in topics:
            bag.add_topic(topic, JOINT_STATE_TYPE)
        for k in range(states if STATES in topics else 0):
            bag.write(STATES, k * 2_000_000, joint_state_message(names, k * 2_000_000, panda.default_positions,
                                                                 np.zeros(len(names)), np.zeros(len(names))))
        for k in range(commands if COMMANDS in topics else 0):
            bag.write(COMMANDS, k * 20_000_000, joint_state_message(names, k * 20_000_000, panda.default_positions))
    return path


def test_missing_topic_is_named(tmp_path, panda):
    with pytest.raises(BagError, match=r"missing required topics \['/joint_commands'\]"):
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


def test_truncated_bag(tmp_path, sim_bag, panda):
    copy = tmp_path / "truncated"
    shutil.copytree(sim_bag, copy)
    data = next(copy.glob("*.mcap"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(BagError, match="truncated|damaged"):
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
