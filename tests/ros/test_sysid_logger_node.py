"""sysid_logger's refusals and its clock, driven in this process with real messages (no graph)."""

from __future__ import annotations

import pytest
from sensor_msgs.msg import JointState

from sim2real.core.robot_profile import load_profile
from sim2real.nodes.sysid_logger import SysidLoggerNode

pytestmark = pytest.mark.ros

PANDA = load_profile("panda")


@pytest.fixture
def make_logger(make_any):
    loggers = []

    def make(**parameters):
        loggers.append(make_any(SysidLoggerNode, **{"duration": 5.0, **parameters}))
        return loggers[-1]

    yield make
    for logger in loggers:  # before make_any destroys it: the bag is closed
        logger.stop()


@pytest.mark.parametrize(
    "parameters, words",
    [
        ({"extra_topics": "/low:unitree_go/msg/LowState"}, "not a message type the bag writer knows"),
        ({"settle": float("nan")}, "parameter settle:=nan must be a finite number"),
        ({"suspended": True}, "parameter suspended:=true: robot 'panda' has a fixed base"),
        # Played on the simulated Go2 first: every joint at 0.6 rad tips a standing one over.
        (
            {"robot": "go2", "kind": "multisine", "amplitude": 0.6, "legs": 0, "duration": 10.0},
            "would not keep the standing go2 up in simulation",
        ),
    ],
)
def test_a_refused_setting_leaves_no_bag_behind(make_logger, tmp_path, parameters, words):
    """Settings are checked before the bag is created: a bag left without metadata.yaml is
    unreadable and blocks the same path on the next try."""
    bag = tmp_path / "bag"
    with pytest.raises(ValueError, match=words):
        make_logger(bag=str(bag), **parameters)
    assert not bag.exists()
    (tmp_path / "old").mkdir()
    with pytest.raises(ValueError, match="exists already; a bag is never overwritten"):
        make_logger(bag=str(tmp_path / "old"))


def test_stamps_that_jump_back_abort_the_recording_with_the_reason(make_logger, tmp_path):
    node = make_logger(bag=str(tmp_path / "bag"))

    def state(seconds):
        msg = JointState(name=list(PANDA.joint_names), position=[float(v) for v in PANDA.default_positions])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(seconds * 1e9), 10**9)
        node._on_state(msg)

    for k in range(100):
        state(100.0 + 0.01 * k)
    assert not node.done
    state(0.0)  # the robot or the sim restarted under the recording
    assert node.done and "stamps jumped back during stand" in node.failed
    assert (tmp_path / "bag" / "metadata.yaml").is_file()


def test_a_robot_on_a_stand_is_recorded_so(make_logger, tmp_path):
    """sysid record --suspended on hardware: only the bag says the robot hung (the fit reads it)."""
    import yaml

    make_logger(robot="go2", suspended=True, bag=str(tmp_path / "hanging")).stop()
    make_logger(robot="go2", bag=str(tmp_path / "standing")).stop()
    custom = {
        name: yaml.safe_load((tmp_path / name / "metadata.yaml").read_text())["rosbag2_bagfile_information"][
            "custom_data"
        ]
        for name in ("hanging", "standing")
    }
    assert custom["hanging"]["suspended"] == "true" and custom["standing"]["suspended"] == "false"
