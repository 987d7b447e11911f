"""`sim2real failures list|show|replay|export` on bundles written by the collector's writer."""
from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

from sim2real.cli import main
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
    assert [r["name"] for r in rows] == ["20261130T000000.000Z_supervisor_damping",
                                         "20261130T000100.000Z_supervisor_damping"]
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


def test_replay_without_the_recorded_policy_says_how_to_fix_it(bundles, capsys):
    bundle = find_bundle(bundles, "20261130T000000")
    info = json.loads((bundle.path / "failure.json").read_text())
    info["policy"]["path"] = "/robot/only/policy.onnx"
    (bundle.path / "failure.json").write_text(json.dumps(info))
    assert main(["failures", "replay", "20261130T000000", "--dir", str(bundles)]) == 2
    assert "Fix: give one with --policy FILE" in capsys.readouterr().err
