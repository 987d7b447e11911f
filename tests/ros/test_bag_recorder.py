"""`record:=DIR`: the graph's topics in one bag, from which the policy's own ticks are rebuilt."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from sim2real.core.bags import bag_information, bag_topics
from sim2real.core.policy_file import load_policy
from sim2real.train.robot_data import rebuild_samples
from tests.cli_runs import run_cli

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]


def test_a_recorded_run_gives_back_the_observations_the_runtime_acted_on(tmp_path):
    policy_file = ROOT / "policies" / "go2_walk.onnx"
    bag = tmp_path / "bags" / "walk_1"
    result = run_cli(
        [
            "up",
            "--robot",
            "go2",
            "--lockstep",
            "--policy",
            str(policy_file),
            "--autoengage",
            "--no-failure-collector",
            "--record",
            str(bag),
            "--duration",
            "25",
        ],
        timeout=150,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert bag_information(bag)["custom_data"]["robot"] == "go2"
    topics = bag_topics(bag)
    for topic in ("/joint_states", "/imu/data", "/policy/joint_commands", "/safety/status", "/diagnostics"):
        assert topics[topic][1] > 0, topic
    policy = load_policy(policy_file)
    # No policy given: the runtime's /diagnostics name its file, which fits the gait clock's phase.
    samples = rebuild_samples(bag, policy.metadata)
    assert samples.notes == []
    assert len(samples) >= 25  # engaged ticks only (lockstep on a loaded machine may run far behind real time)
    clip = policy.metadata.action_clip
    predicted = np.clip(policy.act(samples.observations), -clip, clip)
    exact = np.abs(predicted - samples.actions).max(axis=1) < 1e-4
    # The runtime's own action again from the rebuilt observation, tick after tick (measured:
    # all but one of ~1500 in a 30-s demo walk).
    assert exact.mean() >= 0.95, f"{exact.mean():.0%} of {len(samples)} ticks rebuilt exactly"


def test_an_operator_s_takeover_recorded_gives_the_demonstrations_it_streamed(probe, start_graph, tmp_path):
    """The arm's path to behaviour cloning: the operator takes over through the supervisor and
    streams targets on /teleop/joint_commands; the recorded bag gives them back as actions, each
    with the state the arm was in."""
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    from tests.ros.test_safety_supervisor import PANDA, PERIOD, Operator

    bag = tmp_path / "teleop"
    graph = start_graph(robot="panda", only=["sim_robot", "safety_supervisor", "bag_recorder"], record=str(bag))
    operator = Operator(probe, PANDA)
    goal_pub = probe.node.create_publisher(PoseStamped, "/goal_pose", 10)
    goal = PoseStamped()
    goal.pose.position.x, goal.pose.position.z, goal.pose.orientation.w = 0.5, 0.4, 1.0
    operator.start()
    assert operator.call("takeover").success and operator.wait_mode("TAKEOVER", 5.0)
    policy = load_policy(ROOT / "policies" / "panda_reach.onnx")
    sent = []
    began = time.monotonic()
    for k in range(200):  # 2 s at 100 Hz (an operator's tool need not keep the policy's rate)
        targets = PANDA.default_positions.copy()
        targets[:2] += 0.2 * np.sin(k / 60)
        operator.teleop_pub.publish(JointState(name=list(PANDA.joint_names), position=[float(x) for x in targets]))
        goal_pub.publish(goal)
        sent.append(targets)
        time.sleep(PERIOD / 2)
    streamed = time.monotonic() - began
    graph.stop()  # the recorder closes the bag
    samples = rebuild_samples(bag, policy.metadata, demonstrations="teleop")
    meta = policy.metadata
    actions = (np.array(sent) - meta.action_offset) / meta.action_scale
    # One a control period (fewer where a loaded machine paused the stream), each a streamed target.
    assert 40 <= len(samples) <= streamed / PERIOD + 2
    distance = np.abs(samples.actions[:, None, :] - actions[None, :, :]).max(axis=2).min(axis=1)
    assert distance.max() < 1e-5
    # Its observation: the arm's joints as they were (the supervisor followed the operator).
    joint = meta.observation_spec.slices()["joint_pos_rel"]
    assert np.abs(samples.observations[:, joint]).max() > 0.05
