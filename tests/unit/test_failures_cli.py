"""`sim2real failures list|show|replay|export` on bundles written by the collector's writer."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

from sim2real.cli.main import main
from sim2real.core.failure_bundle import find_bundle
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile
from sim2real.evaluate.failure_replay import replay_failure
from tests.policy_models import metadata, write_policy, write_target_policy
from tests.unit.failure_bundles import write_arm_bundle

PANDA = load_profile("panda")
SHIPPED = share_dir() / "policies" / "panda_reach.onnx"


@pytest.fixture
def bundles(tmp_path):
    root = tmp_path / "failures"
    write_arm_bundle(root, "20261130T000000.000Z_supervisor_damping", PANDA, SHIPPED)
    write_arm_bundle(root, "20261130T000100.000Z_supervisor_damping", PANDA, SHIPPED, conditions={"latency": 0.02})
    return root


def test_list_show_and_export(bundles, tmp_path, capsys):
    assert main(["failures", "list", "--dir", str(bundles), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [
        "20261130T000000.000Z_supervisor_damping",
        "20261130T000100.000Z_supervisor_damping",
    ]
    assert rows[0]["robot"] == "panda" and rows[0]["reason"] == "test failure"
    png = tmp_path / "show.png"
    assert main(["failures", "show", "20261130T0001", "--dir", str(bundles), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "reason   test failure" in out and '"latency": 0.02' in out
    assert png.stat().st_size > 10_000
    assert main(["failures", "show", "2026", "--dir", str(bundles)]) == 2  # ambiguous prefix
    assert "matches 2 bundles" in capsys.readouterr().err
    archive = tmp_path / "out.tar.gz"
    assert main(["failures", "export", "all", "--dir", str(bundles), "-o", str(archive)]) == 0
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "20261130T000000.000Z_supervisor_damping/failure.json" in names
    assert any(n.endswith("metadata.yaml") for n in names) and any(n.endswith(".mcap") for n in names)
    copy = tmp_path / "copy"
    assert main(["failures", "export", "20261130T000000", "--dir", str(bundles), "-o", str(copy)]) == 0
    assert (copy / "20261130T000000.000Z_supervisor_damping" / "failure.json").is_file()


def test_replay_reports_whether_the_policy_fails_again(bundles, tmp_path):
    bundle = find_bundle(bundles, "20261130T000100")
    # A policy that holds the recorded pose does not fail; one whose output is NaN fails again,
    # and the supervisor in the replay holds on it.
    holding = write_target_policy(tmp_path / "hold.onnx", PANDA, PANDA.default_positions)
    calm = replay_failure(bundle, holding)
    assert not calm.failed and calm.survived_s == calm.duration_s
    assert calm.conditions == {"latency": 0.02}
    broken = write_policy(tmp_path / "nan.onnx", metadata(PANDA), np.nan)
    again = replay_failure(bundle, broken)
    assert again.failed and "not finite" in again.reason and again.survived_s < again.duration_s
    assert main(["failures", "replay", "all", "--dir", str(bundles), "--policy", str(holding)]) == 0


def test_a_bundle_recorded_on_a_suspended_robot_replays_it_suspended(tmp_path):
    """A Go2 whose left hips swing out (0.8 rad) tips over standing; held in the air, as the
    collector recorded it, its trunk stays level."""
    go2 = load_profile("go2")
    targets = go2.default_positions.copy()
    for joint in ("FL_hip_joint", "RL_hip_joint"):
        targets[go2.joint_names.index(joint)] = 0.8
    policy = write_target_policy(tmp_path / "splay.onnx", go2, targets)
    results = {}
    for suspended in (False, True):
        name = f"20261130T00000{int(suspended)}.000Z_supervisor_damping"
        write_arm_bundle(tmp_path / "failures", name, go2, policy, suspended=suspended)
        results[suspended] = replay_failure(find_bundle(tmp_path / "failures", name), policy)
    assert results[False].max_tilt_deg > 10
    assert (
        results[True].max_tilt_deg < 1 and "the robot hung in the air (suspended), as recorded" in results[True].notes
    )


def test_a_bundle_from_the_mujoco_robot_replays_on_mujoco(tmp_path):
    policy = write_target_policy(tmp_path / "hold.onnx", PANDA, PANDA.default_positions)
    results = {}
    for engine in ("mujoco", "isaac"):
        name = f"20261130T00000{len(results)}.000Z_supervisor_damping"
        write_arm_bundle(tmp_path / "failures", name, PANDA, policy, engine=engine)
        results[engine] = replay_failure(find_bundle(tmp_path / "failures", name), policy)
    assert (
        not results["mujoco"].failed and "replayed on mujoco, the engine it was recorded on" in results["mujoco"].notes
    )
    assert "recorded on engine 'isaac', which this version lacks: replayed on pybullet" in results["isaac"].notes
    name = "20261130T000009.000Z_supervisor_damping"
    write_arm_bundle(tmp_path / "failures", name, PANDA, policy, engine="mujoco", model="example-robot-data:panda")
    elsewhere = replay_failure(find_bundle(tmp_path / "failures", name), policy)
    assert (
        any(
            note.startswith("recorded on robot model 'example-robot-data:panda', not available here")
            for note in elsewhere.notes
        )
        and not elsewhere.failed
    )


def test_replay_without_the_recorded_policy_says_how_to_fix_it(bundles, capsys):
    bundle = find_bundle(bundles, "20261130T000000")
    info = json.loads((bundle.path / "failure.json").read_text())
    info["policy"]["path"] = "/robot/only/policy.onnx"
    (bundle.path / "failure.json").write_text(json.dumps(info))
    assert main(["failures", "replay", "20261130T000000", "--dir", str(bundles)]) == 2
    assert "Fix: give one with --policy FILE" in capsys.readouterr().err


def test_list_is_oldest_first_by_wall_time_not_by_the_nodes_clock(bundles, capsys):
    """In lockstep time_ns is sim time, which restarts with every run: a later run's bundle
    has a smaller one."""
    write_arm_bundle(
        bundles,
        "20261130T000200.000Z_supervisor_damping",
        PANDA,
        SHIPPED,
        event_s=1.0,
        wall_time="2026-11-30T00:02:00+00:00",
    )
    assert main(["failures", "list", "--dir", str(bundles), "--json"]) == 0
    assert [r["name"][:15] for r in json.loads(capsys.readouterr().out)] == [
        "20261130T000000",
        "20261130T000100",
        "20261130T000200",
    ]


def test_replay_all_skips_a_bundle_it_cannot_replay_and_replays_the_rest(bundles, capsys):
    bundle = find_bundle(bundles, "20261130T000000")
    info = json.loads((bundle.path / "failure.json").read_text())
    info["policy"] = None  # recorded without a policy running
    (bundle.path / "failure.json").write_text(json.dumps(info))
    assert main(["failures", "replay", "all", "--dir", str(bundles), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["bundle"] for r in json.loads(captured.out)] == ["20261130T000100.000Z_supervisor_damping"]
    assert "skipped 20261130T000000.000Z_supervisor_damping: the recorded policy None" in captured.err
    # With nothing left to replay, an error that says so.
    other = find_bundle(bundles, "20261130T000100")
    (other.path / "failure.json").write_text(json.dumps(info))
    assert main(["failures", "replay", "all", "--dir", str(bundles)]) == 2
    assert "none of the 2 bundles" in capsys.readouterr().err


def test_a_damaged_bundle_is_read_in_part_or_named_and_skipped_by_replay_all(bundles, tmp_path, capsys):
    """A truncated MCAP (a recorder killed mid-write, a full disk) is read as far as it goes,
    with a warning that counts what was lost; one with nothing left is named, not a rosbags
    traceback, and replay all goes on past it."""
    bundle = find_bundle(bundles, "20261130T000000")
    data = next(bundle.path.glob("*.mcap"))
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) // 2])
    assert main(["failures", "show", "20261130T000000", "--dir", str(bundles), "--plot", str(tmp_path / "x.png")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and "messages lost (/goal_pose" in err and "Traceback" not in err
    data.write_bytes(whole[:100])
    assert main(["failures", "show", "20261130T000000", "--dir", str(bundles), "--plot", str(tmp_path / "x.png")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    holding = write_target_policy(tmp_path / "hold.onnx", PANDA, PANDA.default_positions)
    assert main(["failures", "replay", "all", "--dir", str(bundles), "--policy", str(holding), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["bundle"] for r in json.loads(captured.out)] == ["20261130T000100.000Z_supervisor_damping"]
    assert "skipped 20261130T000000.000Z_supervisor_damping: " in captured.err and "cannot be read" in captured.err
    (bundle.path / "failure.json").write_text('{"reason": "half-writ')
    assert main(["failures", "show", str(bundle.path)]) == 2
    assert "failure.json cannot be read" in capsys.readouterr().err


def test_replay_with_another_robots_policy_says_so(bundles, capsys):
    go2 = share_dir() / "policies" / "go2_walk.onnx"
    assert main(["failures", "replay", "20261130T000000", "--dir", str(bundles), "--policy", str(go2)]) == 2
    err = capsys.readouterr().err
    assert "was recorded on robot 'panda'" in err and "Fix: give a policy trained for 'panda'" in err
    assert "Traceback" not in err
