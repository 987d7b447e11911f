"""Package metadata for pip and for colcon (ament_python).

pip:    pip install -e '.[ros,test]'   (ROS 2 from PyPI wheels; for machines without ROS)
colcon: cd ros2_ws && colcon build --symlink-install   (on a robot computer with ROS)
"""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "sim2real"
HERE = Path(__file__).parent


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install ``folder`` under share/sim2real/, keeping sub-folders."""
    entries: dict[str, list[str]] = {}
    for path in sorted((HERE / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(HERE)
            entries.setdefault(f"share/{PACKAGE}/{relative.parent}", []).append(str(relative))
    return list(entries.items())


# One executable per node (installed to lib/sim2real/ by setup.cfg for `ros2 run`),
# plus the `sim2real` command line. tests/unit/test_bringup.py checks this list
# against the node plan in src/sim2real/graph/plan.py.
NODE_EXECUTABLES = {
    "sim_robot": "sim2real.nodes.sim_robot:main",
    "pose_commander": "sim2real.nodes.pose_commander:main",
    "safety_supervisor": "sim2real.nodes.safety_supervisor:main",
    "policy_runtime": "sim2real.nodes.policy_runtime:main",
    "demo_script": "sim2real.nodes.demo_script:main",
    "ros2_control_bridge": "sim2real.nodes.ros2_control_bridge:main",
    "unitree_bridge": "sim2real.nodes.unitree_bridge:main",
    "failure_collector": "sim2real.nodes.failure_collector:main",
    "bag_recorder": "sim2real.nodes.bag_recorder:main",
    "sysid_logger": "sim2real.nodes.sysid_logger:main",
    "state_estimator": "sim2real.nodes.state_estimator:main",
    "control_chain": "sim2real.nodes.control_chain:main",
}

# The ROS 2 client library and standard messages as PyPI wheels. An extra, so that a
# robot computer with a system ROS 2 (apt, colcon) does not pull a second copy.
ROS_WHEELS = [
    "ros-rclpy[fastrtps]",
    "ros-std-msgs",
    "ros-sensor-msgs",
    "ros-geometry-msgs",
    "ros-nav-msgs",
    "ros-diagnostic-msgs",
    "ros-std-srvs",
    "ros-rosgraph-msgs",
]

setup(
    name=PACKAGE,
    version="0.1.0",
    description="Sim-to-real for robot policies: PyBullet training, ONNX export, ROS 2 runtime under a safety supervisor",
    license="Apache-2.0",
    python_requires=">=3.10",
    package_dir={"": "src"},
    packages=find_packages("src"),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/sim2real"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("config"),
        *tree("urdf"),
        *tree("policies"),
    ],
    install_requires=[
        "numpy>=1.24",
        "pyyaml>=6",
        "pybullet>=3.2.5",
        "mujoco>=3.3,<4",  # the second engine (sim_robot engine:=mujoco, eval --engine mujoco): MjSpec API of 3.x
        "pin>=3",
        "tqdm>=4.60",
        "matplotlib>=3.9",  # boxplot(tick_labels=...) (3.9), the eval plot
        # Exactly this torch: its CPU build is on our machines' disk; any other version
        # (or an open range) makes pip download a multi-GB CUDA build.
        "torch==2.13.0",
        "gymnasium>=1.0",
        "rsl-rl-lib>=5.5,<6",
        "tensorboard>=2.14",
        "onnx>=1.16",
        "onnxruntime>=1.18",
        "scipy>=1.10",
        "cma>=3.3",  # sysid: CMA-ES global search of the simulator parameters
        "rosbags>=0.10",  # sysid bags and failure bundles: rosbag2 + MCAP read/write without a ROS install
        "mcap>=1.1",  # tests check every bag opens with the reference MCAP reader
        "cryptography>=42",  # ed25519 signatures of policy files (sim2real policy sign/verify, trusted_keys)
    ],
    extras_require={
        "ros": ROS_WHEELS,
        # The Unitree Go2's own low-level interface (rt/lowcmd, rt/lowstate) is plain DDS, not ROS: cyclonedds.
        "unitree": ["cyclonedds>=11.0,<12"],
        # Independently written robot models for the MuJoCo engine's reality sets (example-robot-data:go2).
        "reality": ["example-robot-data>=6"],
        # Training's env workers and the evaluations on a cluster (`--ray`): Ray's actors and tasks,
        # their placement and fault tolerance, instead of a home-made distribution layer.
        "ray": ["ray>=2.40,<3"],
        # ruff (lint), import-linter (the layer contracts, also checked by a test), codespell and
        # mypy (the core and the sim, basic mode): `make lint`, which CI runs before the tests.
        "test": [
            "pytest>=7",
            "pytest-rerunfailures>=12",
            "pytest-timeout>=2.3",
            "pytest-xdist>=3.5",
            "colcon-common-extensions>=0.3",
            # Pinned: a newer linter's new rules or words would fail CI with no change here.
            "ruff==0.17.6",
            "import-linter==2.17",
            "codespell==2.4.3",
            "mypy==2.4.1",
        ],
    },
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "sim2real = sim2real.cli.main:main",
            *(f"{name} = {target}" for name, target in NODE_EXECUTABLES.items()),
        ],
    },
)
