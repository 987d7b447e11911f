"""The pipeline's validate + push stages against a running Panda graph: a candidate that passes
validation is copied into the runtime's policy directory and hot-swapped, confirmed from the
runtime's /diagnostics."""

from __future__ import annotations

import json

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped

from sim2real.cli.main import main
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import qos
from tests.policy_models import actions_for, metadata, write_policy, write_target_policy
from tests.ros.conftest import wait_for
from tests.unit.failure_bundles import write_arm_bundle
from tests.unit.test_failures_cli import SHIPPED

pytestmark = [pytest.mark.ros, pytest.mark.slow]
PANDA = load_profile("panda")


def running_sha(statuses) -> str | None:
    for array in reversed(statuses):
        for status in array.status:
            if status.name == "policy_runtime: policy":
                return next((kv.value for kv in status.values if kv.key == "sha256"), None)
    return None


def test_a_validated_candidate_is_pushed_by_hot_swap(probe, start_graph, tmp_path, capsys):
    robot_dir = tmp_path / "robot"
    current = write_target_policy(robot_dir / "hold.onnx", PANDA, PANDA.default_positions)
    # Same targets from a differently shaped network: equal in every replay and world, another sha256.
    meta = metadata(PANDA)
    candidate = write_policy(
        tmp_path / "work" / "candidate.onnx", meta, actions_for(meta, PANDA.default_positions), hidden=(16, 16)
    )
    failures = tmp_path / "failures"
    write_arm_bundle(failures, "20261130T000000.000Z_supervisor_damping", PANDA, SHIPPED)
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 10)
    goal_pub = probe.node.create_publisher(PoseStamped, "/goal_pose", qos.COMMAND)
    goal = PoseStamped()
    goal.pose.position.x, goal.pose.position.z, goal.pose.orientation.w = 0.5, 0.4, 1.0
    probe.node.create_timer(0.1, lambda: goal_pub.publish(goal))  # the reach policy ticks only with a goal
    start_graph(
        robot="panda", policy=str(current), autoengage=True, failure_collector="false", policy_dirs=str(robot_dir)
    )
    assert wait_for(lambda: running_sha(diagnostics) == load_policy(current).sha256, 40.0)

    out = tmp_path / "pipe"
    common = [
        "--robot",
        "panda",
        "--policy",
        str(current),
        "--failures",
        str(failures),
        "--out",
        str(out),
        "--candidate",
        str(candidate),
    ]
    assert (
        main(
            [
                "pipeline",
                "validate",
                *common,
                "--episodes",
                "1",
                "--eval-workers",
                "0",
                "--randomization",
                "panda_reference",
            ]
        )
        == 0
    )
    assert json.loads((out / "validation.json").read_text())["passed"]
    assert main(["pipeline", "push", *common, "--timeout", "30"]) == 0
    state = json.loads((out / "pipeline.json").read_text())
    assert state["pushed"] and state["pushed_path"].startswith(str(robot_dir))
    assert "confirmed by its /diagnostics" in capsys.readouterr().out
    sha = load_policy(candidate).sha256
    assert wait_for(lambda: running_sha(diagnostics) == sha, 10.0), running_sha(diagnostics)
