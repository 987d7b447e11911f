"""The README's main job, `sim2real demo`: without a policy (joint script) and with the shipped ones."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.ros]

SIM2REAL = Path(sys.executable).parent / "sim2real"


# Hold error: the Panda's controller compensates gravity, so it holds tightly; the Go2's
# legged-gym gains (kp 20) let its knees give ~0.3 rad under its own 15 kg.
@pytest.mark.parametrize("robot, lockstep, hold_error", [("go2", False, 0.5), ("panda", True, 0.02)])
def test_joint_demo_moves_the_robot_through_the_supervisor_and_reports(tmp_path, robot, lockstep, hold_error):
    command = [str(SIM2REAL), "demo", "--robot", robot, "--no-policy", "--out", str(tmp_path)] + \
        (["--lockstep"] if lockstep else [])
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, env=os.environ.copy())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"=== sim2real demo: {robot} (joint script, no policy) ===" in result.stdout
    report = json.loads((tmp_path / "tracking.json").read_text())
    assert report["robot"] == robot
    assert 450 <= report["joint_states_rate_hz"] <= 550
    assert report["move_max_error_rad"] > 0.0
    assert report["hold_rms_error_rad"] < hold_error
    assert (tmp_path / "tracking.png").stat().st_size > 10_000
