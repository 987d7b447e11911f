"""The README's main job, `sim2real demo`: without a policy (joint script) and with the shipped ones."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runs import run_cli
from tests.shipped_demo import SIM_DEMO_DISTANCE_M, SIM_DEMO_FIRST_16S_DISTANCE_M

pytestmark = [pytest.mark.slow, pytest.mark.ros]


# Lockstep: the physics do not depend on how busy the machine is (two runs on an idle machine
# gave the same figures to the last digit), but the pose commander starts its script on the first
# state it hears: on a loaded machine it can start later against the supervisor's stand-up, and
# the Go2's hold RMS read 0.082 rad once beside the unit tests (0.064 alone), the Panda's move
# RMS 0.107 rad once (limit 0.1). Hold error: the
# Panda's controller compensates gravity, so it holds tightly. The Go2 hangs in the air
# (suspended: the script would topple it standing) and its legged-gym gains (kp 20) let each
# hanging leg's weight pull its hip ~0.07 rad outwards: hold RMS 0.064 rad, move RMS 0.073 rad.
# Standing, it fell in every run (move RMS 1.14 rad).
@pytest.mark.timing_sensitive(reason="the script's start against the stand-up follows the load")
@pytest.mark.parametrize("robot, hold_error", [("go2", 0.08), ("panda", 0.02)])
def test_joint_demo_moves_the_robot_through_the_supervisor_and_reports(tmp_path, robot, hold_error):
    result = run_cli(
        ["demo", "--robot", robot, "--no-policy", "--lockstep", "--timeout", "200", "--out", str(tmp_path)], timeout=240
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"=== sim2real demo: {robot} (joint script, no policy) ===" in result.stdout
    assert ("suspended as on a gantry" in result.stdout) == (robot == "go2")  # the plan
    assert ("suspended (feet clear of the ground)" in result.stdout) == (robot == "go2")  # sim_robot itself
    report = json.loads((tmp_path / "tracking.json").read_text())
    assert report["robot"] == robot
    assert report["joint_states_rate_hz"] == pytest.approx(500, abs=1)  # per sim second: every state
    assert report["joint_states_gaps_over_1.5_periods"] == 0
    assert report["hold_rms_error_rad"] < hold_error
    assert 0.0 < report["move_rms_error_rad"] < 0.1  # the joints follow the 0.2 rad swing
    assert (tmp_path / "tracking.png").stat().st_size > 10_000


@pytest.mark.timing_sensitive(
    reason="the real-time sim misses periods on a loaded machine, and the supervisor's stand holds the "
    "hanging Go2 late (fell standing: 1.0 rad RMS once beside the unit tests)"
)
def test_joint_demo_runs_in_real_time(tmp_path):
    """The same script on the wall clock, as `sim2real demo --no-policy` runs by default. On a
    loaded 2-core machine the sim misses periods and the supervisor may hold on a late state,
    so exact tracking figures are the lockstep test's; this checks that the real-time graph plays
    the script to its end with the Go2 hanging, streams states at the sensing rate's order
    (benchmarks/sim_step.py measures the rate: 461-478 Hz seen here on an idle machine, 154 Hz
    under load), and that the robot did not fall: 0.065-0.093 rad RMS measured here, 1.1 rad
    when it fell standing; 0.4 leaves room for the 0.2 rad swing held late plus the sag."""
    result = run_cli(["demo", "--robot", "go2", "--no-policy", "--timeout", "200", "--out", str(tmp_path)], timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "tracking.json").read_text())
    assert "suspended as on a gantry" in result.stdout and "suspended (feet clear of the ground)" in result.stdout
    assert 100 <= report["joint_states_rate_hz"] <= 550
    for phase in ("hold", "move", "settle"):
        assert 0.0 <= report[f"{phase}_rms_error_rad"] < 0.4, report


# The Go2 has its own test below (it walks a script; the Panda reaches goals).
@pytest.mark.parametrize("robot", ["panda"])
def test_policy_demo_runs_the_shipped_policy_through_the_whole_chain_in_lockstep(tmp_path, robot):
    """sim_robot -> policy_runtime -> safety_supervisor -> sim_robot with the shipped policy:
    the supervisor engages, the script plays to its end, and the report, plot and video are
    written. If the supervisor damps, it is for a velocity limit (the one check a reaching arm
    near its speed limits can trip), not for a stale or broken input."""
    result = run_cli(["demo", "--robot", robot, "--lockstep", "--timeout", "360", "--out", str(tmp_path)], timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"=== sim2real demo: {robot} with {robot}_" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    modes = [event["mode"] for event in report["supervisor_modes"]]
    assert "ACTIVE" in modes, report["supervisor_modes"]
    summary = report["summary"]
    assert summary["duration_s"] >= 29.0
    assert summary["goals"] == 6
    trips = [event["last_trip"] for event in report["supervisor_modes"] if event["mode"] == "DAMPING"]
    assert all("velocity_limit" in trip for trip in trips), trips
    assert float(report["policy_runtime"]["tick_latency_p50_ms"]) > 0
    for name in ("motion.png", "demo.gif", "report.npz"):
        assert (tmp_path / name).stat().st_size > 5_000


def test_go2_demo_walks_the_shipped_policy_through_the_whole_chain_in_lockstep(tmp_path):
    """The Go2 main job: sim_robot -> policy_runtime -> safety_supervisor -> sim_robot with
    policies/go2_walk.onnx, /cmd_vel from the demo script. It walks without falling and without
    the supervisor ever leaving ACTIVE, and covers a fair share of the distance the script
    commands (policies/go2_walk.md gives the shipped file's tracking error)."""
    from sim2real.core.command_script import WALK_DURATION, WALK_SCRIPT

    result = run_cli(
        ["demo", "--robot", "go2", "--lockstep", "--no-video", "--timeout", "360", "--out", str(tmp_path)], timeout=400
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "=== sim2real demo: go2 with go2_walk.onnx ===" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["script_start"]["by"] == "active"
    assert [event["mode"] for event in report["supervisor_modes"]][-1] == "ACTIVE", report["supervisor_modes"]
    assert not {"TAKEOVER", "DAMPING", "ESTOP"} & {event["mode"] for event in report["supervisor_modes"]}
    summary = report["summary"]
    assert summary["duration_s"] >= WALK_DURATION - 1.0 and not summary["fell"]
    ends = [start for start, *_ in WALK_SCRIPT[1:]] + [WALK_DURATION]
    commanded = sum((end - start) * abs(vx) for (start, vx, _, _), end in zip(WALK_SCRIPT, ends))
    assert summary["distance_m"] >= 0.4 * commanded, (summary, commanded)
    # The reference other paths are compared with (the Go2 double through the bridge): lockstep
    # repeats it to the last digit on one machine; 2 % leaves room for another CPU's floating point
    # (ONNX Runtime's kernels) over 30 s of walking, far inside the 10 % the double is held to. A
    # policy that walks another distance updates tests/shipped_demo.py.
    assert summary["distance_m"] == pytest.approx(SIM_DEMO_DISTANCE_M, rel=0.02), summary
    samples = np.load(tmp_path / "report.npz")
    first = samples["t"] <= samples["t"][0] + 16.0
    path = np.linalg.norm(np.diff(samples["base_positions"][first, :2], axis=0), axis=1).sum()
    assert path == pytest.approx(SIM_DEMO_FIRST_16S_DISTANCE_M, rel=0.02)


def test_a_node_that_dies_is_named_as_the_reason_the_demo_stopped(tmp_path):
    """A policy for another robot: policy_runtime exits with its reason, and the demo says that
    node stopped (rather than waiting and then blaming a missing report)."""
    panda_policy = Path(__file__).resolve().parents[2] / "policies" / "panda_reach.onnx"
    result = run_cli(
        ["demo", "--robot", "go2", "--policy", str(panda_policy), "--timeout", "200", "--out", str(tmp_path)],
        timeout=240,
    )
    assert result.returncode == 1
    assert "does not match robot profile 'go2'" in result.stdout
    assert "error: policy_runtime (exit code 2) stopped after" in result.stderr, result.stderr[-2000:]


def test_bad_conditions_are_refused_before_any_node_starts():
    result = run_cli(["demo", "--robot", "go2", "--conditions", "{grund_friction: 0.5}"], timeout=60)
    assert result.returncode == 2
    assert "conditions:='{grund_friction: 0.5}' has unknown names ['grund_friction']" in result.stderr
    assert "starting" not in result.stdout and "[sim_robot]" not in result.stdout
