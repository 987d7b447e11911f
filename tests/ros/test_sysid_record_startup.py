"""`sim2real sysid record` as an operator runs it: with no robot driver it gives up after its
start-up cap, with the real reason, and leaves the bag marked as aborted."""

from __future__ import annotations

import pytest
import yaml

from tests.cli_runs import run_cli

pytestmark = pytest.mark.ros


def test_with_no_driver_the_recorder_gives_up_after_its_cap_and_says_why(tmp_path):
    bag = tmp_path / "bag"
    result = run_cli(
        [
            "sysid",
            "record",
            "--robot",
            "panda",
            "--hardware",
            "topic",
            "-o",
            str(bag),
            "--start-timeout",
            "4",
            "--duration",
            "5",
            "--kind",
            "chirp",
        ],
        timeout=120,
        cwd=tmp_path,
    )
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 1, output
    assert (
        "error: the recording stopped: the robot was not engaged within 4 s: no /joint_states received" in result.stderr
    ), output
    custom = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]["custom_data"]
    assert custom["completed"] == "false" and "no /joint_states received" in custom["aborted"]
