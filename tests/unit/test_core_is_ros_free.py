"""The core must import on a machine without ROS: rclpy blocked, every core module imported."""
import subprocess
import sys
from pathlib import Path

import sim2real

ROS_FREE_PACKAGES = ["core", "sim", "train", "sysid", "evaluate"]
ROS_FREE_MODULES = ["sim2real.bringup", "sim2real.cli", "sim2real.graph_processes"]

GUARD = r"""
import importlib, pkgutil, sys
class BlockRos:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("rclpy", "rosidl_runtime_py", "rclpy_message_converter"):
            raise ImportError(f"{name} imported by the ROS-free core")
sys.meta_path.insert(0, BlockRos())
import sim2real
root = sim2real.__path__[0]
names = list(sys.argv[2:])
for package in sys.argv[1].split(","):
    try:
        pkg = importlib.import_module(f"sim2real.{package}")
    except ModuleNotFoundError as exc:
        if exc.name == f"sim2real.{package}":
            continue  # not written yet
        raise
    names += [m.name for m in pkgutil.walk_packages(pkg.__path__, f"sim2real.{package}.")]
for name in names:
    importlib.import_module(name)
print(len(names), "modules")
"""


def test_core_imports_with_rclpy_blocked():
    result = subprocess.run([sys.executable, "-c", GUARD, ",".join(ROS_FREE_PACKAGES), *ROS_FREE_MODULES],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[0]) >= 8


def test_no_rclpy_import_statement_outside_nodes():
    root = Path(sim2real.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "nodes" not in p.relative_to(root).parts
                 and any(line.strip().startswith(("import rclpy", "from rclpy")) for line in p.read_text().splitlines())]
    assert offenders == []
