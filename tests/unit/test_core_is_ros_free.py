"""The layers hold: the contracts in pyproject.toml (import-linter, a static check of every
import, lazy ones included) and the command line importing on a machine without ROS (its ROS
commands import the nodes only when they run)."""

import shutil
import subprocess
import sys
from pathlib import Path

import sim2real

REPO = Path(__file__).resolve().parents[2]

GUARD = r"""
import importlib, pkgutil, sys
class BlockRos:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("rclpy", "rosidl_runtime_py", "rclpy_message_converter", "launch", "launch_ros"):
            raise ImportError(f"{name} imported where ROS must not be")
sys.meta_path.insert(0, BlockRos())
names = []
for name in sys.argv[1:]:
    if name.endswith(".*"):  # every module of a package
        package = importlib.import_module(name[:-2])
        names += [m.name for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    else:
        names.append(name)
for name in names:
    importlib.import_module(name)
print(len(names), "imported")
"""


def test_the_import_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is in the test extra: pip install -e '.[test]'"
    result = subprocess.run([lint_imports, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_core_and_the_command_line_import_with_ros_blocked():
    """At run time too: a third-party package that imports ROS itself is not in the static
    graph. The core (what a robot computer runs) in full; the other ROS-free packages import
    torch, PyBullet and MuJoCo, and the static contracts cover them."""
    result = subprocess.run(
        [sys.executable, "-c", GUARD, "sim2real.core.*", "sim2real.cli.main", "sim2real.graph.*"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[0]) >= 30


def test_no_rclpy_import_statement_outside_nodes():
    root = Path(sim2real.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "nodes" not in p.relative_to(root).parts
        and any(line.strip().startswith(("import rclpy", "from rclpy")) for line in p.read_text().splitlines())
    ]
    assert offenders == []
