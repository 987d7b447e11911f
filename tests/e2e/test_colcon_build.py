"""`colcon build --symlink-install` of this repository, checked in its install tree."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The build runs in the first test's fixture, under its own 600 s limit: the test limit is above it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def install_tree(tmp_path_factory):
    work = tmp_path_factory.mktemp("colcon")
    env = {**os.environ, "AMENT_PREFIX_PATH": sys.prefix, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    result = subprocess.run(
        [
            str(VENV_BIN / "colcon"),
            "--log-base",
            str(work / "log"),
            "build",
            "--symlink-install",
            "--base-paths",
            str(ROOT),
            "--build-base",
            str(work / "build"),
            "--install-base",
            str(work / "install"),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Finished <<< sim2real" in result.stdout
    return work / "install" / "sim2real", env


def test_executables_land_in_lib_for_ros2_run(install_tree):
    prefix, _ = install_tree
    for executable in ("sim_robot", "pose_commander", "sim2real"):
        path = prefix / "lib" / "sim2real" / executable
        assert path.is_file() and os.access(path, os.X_OK), f"{path} missing or not executable"


def test_share_files_and_ament_index_entry(install_tree):
    prefix, _ = install_tree
    share = prefix / "share" / "sim2real"
    for relative in (
        "package.xml",
        "launch/bringup.launch.py",
        "config/robots/go2.yaml",
        "config/robots/panda.yaml",
        "urdf/go2.urdf",
        "urdf/panda.urdf",
    ):
        assert (share / relative).is_file(), f"share/sim2real/{relative} not installed"
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "sim2real").exists()


def test_installed_package_finds_its_share_through_the_ament_index(install_tree):
    prefix, env = install_tree
    env = {**env, "AMENT_PREFIX_PATH": f"{prefix}:{sys.prefix}"}
    code = "from ament_index_python.packages import get_package_share_directory as g; print(g('sim2real'))"
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == str(prefix / "share" / "sim2real")
    plan = subprocess.run(
        [str(prefix / "lib" / "sim2real" / "sim2real"), "up", "--robot", "go2", "--print-plan"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plan.returncode == 0, plan.stderr
    assert '"executable": "sim_robot"' in plan.stdout
    # The node executable starts and reports a configuration error cleanly.
    node = subprocess.run(
        [str(prefix / "lib" / "sim2real" / "sim_robot"), "--ros-args", "-p", "robot:=spot"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert node.returncode == 2 and "no profile named 'spot'" in node.stdout
