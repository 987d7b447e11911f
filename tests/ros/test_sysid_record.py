"""Round trip through a real graph: sim_robot (hidden conditions, sensor noise) + safety supervisor +
sysid_logger record a bag, which opens with rosbags and mcap and is fitted back by `sim2real sysid fit`."""

from __future__ import annotations

import json
import random

import pytest
import yaml
from mcap.reader import make_reader

from sim2real.cli.main import main
from sim2real.core.robot_profile import load_profile
from sim2real.graph.processes import GraphProcesses
from sim2real.graph.sysid_recording import make_sysid_plan
from sim2real.sysid.dataset import read_bag
from tests.ros.conftest import GraphLog, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HIDDEN = {"motor_strength": 0.9, "mass_scale": 1.1, "joint_friction": 0.3, "joint_damping": 0.2, "latency": 0.01}
NOISE = {"joint_position_noise": 0.0005, "joint_velocity_noise": 0.01}
DURATION = 30.0


def test_record_through_the_supervisor_then_fit(tmp_path):
    bag = tmp_path / "panda_sysid"
    plan = make_sysid_plan(
        robot="panda",
        hardware="sim",
        lockstep="true",
        bag=str(bag),
        kind="multisine",
        duration=str(DURATION),
        conditions=yaml.safe_dump({**HIDDEN, **NOISE}, default_flow_style=True),
    )
    assert [n.name for n in plan.nodes] == ["sim_robot", "safety_supervisor", "sysid_logger"]
    log = GraphLog()
    # A domain of its own, outside the 20-99 the other test sessions draw from: this graph runs
    # for minutes, and a stray /joint_commands or /safety/status from another graph on this
    # machine would corrupt the recording (the test talks to the graph only through the bag).
    domain = str(random.SystemRandom().randint(101, 200))
    graph = GraphProcesses(plan, output=log, env={"ROS_DOMAIN_ID": domain})
    try:
        graph.start()
        finished = wait_for(lambda: "sysid_logger" in graph.exited(), timeout=DURATION * 8 + 120, poll=0.5)
    finally:
        codes = graph.stop()
    assert finished, "sysid_logger did not finish the excitation:\n" + log.text()[-3000:]
    assert codes["sysid_logger"] == 0, log.text()[-3000:]
    assert "-> ACTIVE" in log.text()  # the excitation went through the supervisor, engaged by the logger

    # Opens with the mcap reader: the three recorded topics, with their schemas.
    with next(bag.glob("*.mcap")).open("rb") as stream:
        topics = {channel.topic for _, channel, _ in make_reader(stream).iter_messages()}
    assert {"/joint_states", "/joint_commands"} <= topics
    profile = load_profile("panda")
    segment = read_bag(bag, profile)  # rosbags
    assert segment.metadata["completed"] is True
    assert segment.metadata["excitation"]["kind"] == "multisine"
    assert segment.metadata["hardware"] == "sim"
    assert segment.metadata["suspended"] is False and not segment.suspended  # an arm: never on a stand
    assert segment.duration > DURATION

    out = tmp_path / "panda.yaml"
    assert (
        main(
            [
                "sysid",
                "fit",
                str(bag),
                "--robot",
                "panda",
                "-o",
                str(out),
                "--train-seconds",
                "4",  # two 2 s windows: 2 % off at most in 5 recordings, inside the bounds below
                "--no-plots",
                "--json",
            ]
        )
        == 0
    )
    fitted = yaml.safe_load(out.read_text())["simulator"]["parameters"]
    for name in ("motor_strength", "mass_scale", "joint_friction"):
        error = abs(fitted[name]["value"] - HIDDEN[name]) / HIDDEN[name]
        assert error <= 0.05, json.dumps(fitted, indent=1)
    assert abs(fitted["latency"]["value"] - HIDDEN["latency"]) <= 0.002
