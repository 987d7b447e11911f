"""No Docker engine runs on our CI machines, so the image is checked for consistency only:
everything it copies exists, what it runs is installed, and it uses the system ROS 2."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def test_copied_files_exist_and_entrypoint_is_executable():
    sources = [line.split()[1] for line in DOCKERFILE.splitlines() if line.startswith("COPY ")]
    assert sources, "the Dockerfile copies nothing"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert os.access(ROOT / "docker" / "entrypoint.sh", os.X_OK)


def test_image_runs_the_shipped_launch_file_on_a_ros_base_image():
    assert re.search(r"^FROM ros:\$\{ROS_DISTRO\}-ros-base", DOCKERFILE, re.M)
    launch = re.search(r'CMD \["ros2", "launch", "sim2real", "([^"]+)"\]', DOCKERFILE).group(1)
    assert (ROOT / "launch" / launch).is_file()
    # The robot computer has ROS 2 from the image: the PyPI ROS wheels (the `ros` extra) stay out.
    assert "[ros" not in DOCKERFILE
    assert "colcon build" in DOCKERFILE
