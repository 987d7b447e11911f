"""The reference robots' descriptions (urdf/*.urdf) and profiles (config/robots/*.yaml) agree.

Checked with the real libraries the project uses: PyBullet (simulation) and pinocchio
(kinematics/dynamics). No ROS needed.
"""

from __future__ import annotations

import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio
import pybullet as p
import pytest

from sim2real.core.robot_profile import ProfileError, RobotProfile, load_profile
from sim2real.sim.randomization import load_randomization

ROOT = Path(__file__).resolve().parents[2]
ROBOTS = ["go2", "panda"]
MOVABLE = ("revolute", "continuous", "prismatic")


# ----------------------------------------------------------------------------- helpers


def profile_of(robot: str) -> RobotProfile:
    return load_profile(ROOT / "config" / "robots" / f"{robot}.yaml")


def urdf_movable_joints(urdf: Path) -> list[str]:
    root = ET.parse(urdf).getroot()
    return [j.get("name") for j in root.findall("joint") if j.get("type") in MOVABLE]


def pin_model(profile: RobotProfile) -> pinocchio.Model:
    """Fixed base: the URDF root is welded to the world. Floating base: a free-flyer root joint."""
    if profile.fixed_base:
        return pinocchio.buildModelFromUrdf(str(profile.urdf))
    return pinocchio.buildModelFromUrdf(str(profile.urdf), pinocchio.JointModelFreeFlyer())


def pin_actuated_names(model: pinocchio.Model, profile: RobotProfile) -> list[str]:
    names = list(model.names)[1:]  # drop "universe"
    return names if profile.fixed_base else names[1:]  # drop "root_joint"


class Bullet:
    """One DIRECT PyBullet client with the robot loaded at its spawn height."""

    def __init__(self, profile: RobotProfile):
        self.profile = profile
        self.cid = p.connect(p.DIRECT)
        p.setGravity(0, 0, -9.81, physicsClientId=self.cid)
        self.plane = p.createMultiBody(
            0, p.createCollisionShape(p.GEOM_PLANE, physicsClientId=self.cid), physicsClientId=self.cid
        )
        self.body = p.loadURDF(
            str(profile.urdf), [0, 0, profile.spawn_height], useFixedBase=profile.fixed_base, physicsClientId=self.cid
        )
        self.infos = [
            p.getJointInfo(self.body, i, physicsClientId=self.cid)
            for i in range(p.getNumJoints(self.body, physicsClientId=self.cid))
        ]
        self.joint_index = {info[1].decode(): info[0] for info in self.infos}
        self.link_index = {info[12].decode(): info[0] for info in self.infos}

    def movable_joint_names(self) -> list[str]:
        return [info[1].decode() for info in self.infos if info[2] != p.JOINT_FIXED]

    def total_mass(self) -> float:
        return sum(p.getDynamicsInfo(self.body, i, physicsClientId=self.cid)[0] for i in range(-1, len(self.infos)))

    def set_default_pose(self) -> list[int]:
        ids = [self.joint_index[n] for n in self.profile.joint_names]
        for j, q in zip(ids, self.profile.default_positions):
            p.resetJointState(self.body, j, q, 0.0, physicsClientId=self.cid)
        return ids

    def link_position(self, link: str) -> np.ndarray:
        state = p.getLinkState(
            self.body, self.link_index[link], computeForwardKinematics=True, physicsClientId=self.cid
        )
        return np.array(state[4])  # URDF link frame (not the inertial frame)

    def sphere_radius(self, link: str) -> float:
        shapes = p.getCollisionShapeData(self.body, self.link_index[link], physicsClientId=self.cid)
        assert len(shapes) == 1 and shapes[0][2] == p.GEOM_SPHERE, f"{link} should have one sphere collision"
        return shapes[0][3][0]

    def close(self) -> None:
        p.disconnect(self.cid)


@pytest.fixture(params=ROBOTS)
def robot(request) -> str:
    return request.param


@pytest.fixture
def bullet(robot):
    sim = Bullet(profile_of(robot))
    yield sim
    sim.close()


# ----------------------------------------------------------------------------- both robots


def test_profile_loads_by_name_and_by_path(robot):
    by_path = profile_of(robot)
    by_name = load_profile(robot)
    assert by_path.name == by_name.name == robot
    assert by_path.urdf.is_file()
    assert by_path.joint_names == by_name.joint_names


def test_joint_order_agrees_everywhere(robot, bullet):
    profile = profile_of(robot)
    model = pin_model(profile)
    urdf_order = urdf_movable_joints(profile.urdf)
    assert profile.joint_names == urdf_order
    assert bullet.movable_joint_names() == urdf_order
    assert pin_actuated_names(model, profile) == urdf_order
    assert model.nv == (0 if profile.fixed_base else 6) + profile.num_joints


def test_expected_joint_names():
    go2 = profile_of("go2").joint_names
    assert go2 == [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR") for part in ("hip", "thigh", "calf")]
    assert profile_of("panda").joint_names == [f"panda_joint{i}" for i in range(1, 8)]


def test_total_mass_matches_spec(robot, bullet):
    profile = profile_of(robot)
    pin_mass = pinocchio.computeTotalMass(pin_model(profile))
    bullet_mass = bullet.total_mass()
    for what, mass in (("pybullet", bullet_mass), ("pinocchio", pin_mass)):
        assert abs(mass - profile.spec_mass) <= 0.05 * profile.spec_mass, (
            f"{robot}: {what} total mass {mass:.3f} kg vs spec_mass {profile.spec_mass} kg"
        )


def test_no_link_gets_pybullet_default_mass(robot):
    """PyBullet gives a link without <inertial> 1 kg; every link must declare its own."""
    profile = profile_of(robot)
    root = ET.parse(profile.urdf).getroot()
    missing = [link.get("name") for link in root.findall("link") if link.find("inertial") is None]
    assert missing == []


def test_inertias_are_physical(robot):
    root = ET.parse(profile_of(robot).urdf).getroot()
    for link in root.findall("link"):
        inertia = link.find("inertial/inertia").attrib
        mass = float(link.find("inertial/mass").get("value"))
        tensor = np.array(
            [
                [float(inertia["ixx"]), float(inertia["ixy"]), float(inertia["ixz"])],
                [float(inertia["ixy"]), float(inertia["iyy"]), float(inertia["iyz"])],
                [float(inertia["ixz"]), float(inertia["iyz"]), float(inertia["izz"])],
            ]
        )
        principal = np.linalg.eigvalsh(tensor)
        name = link.get("name")
        assert mass > 0, name
        assert principal.min() > 0, name
        a, b, c = sorted(principal)
        assert a + b >= c * (1 - 1e-6), f"{name}: principal moments violate the triangle inequality"


def test_default_pose_within_limits(robot):
    profile = profile_of(robot)
    assert np.all(profile.lower_limits <= profile.default_positions)
    assert np.all(profile.default_positions <= profile.upper_limits)


def test_limits_agree_between_urdf_and_profile(robot, bullet):
    profile = profile_of(robot)
    model = pin_model(profile)
    for spec in profile.joints:
        joint = model.joints[model.getJointId(spec.name)]
        iq, iv = joint.idx_q, joint.idx_v
        assert model.lowerPositionLimit[iq] == pytest.approx(spec.lower, abs=1e-6), spec.name
        assert model.upperPositionLimit[iq] == pytest.approx(spec.upper, abs=1e-6), spec.name
        assert model.effortLimit[iv] == pytest.approx(spec.effort_limit, abs=1e-6), spec.name
        assert model.velocityLimit[iv] == pytest.approx(spec.velocity_limit, abs=1e-6), spec.name
        info = bullet.infos[bullet.joint_index[spec.name]]
        assert (info[8], info[9], info[10], info[11]) == pytest.approx(
            (spec.lower, spec.upper, spec.effort_limit, spec.velocity_limit), abs=1e-6
        ), spec.name


def test_pybullet_and_pinocchio_kinematics_agree(robot, bullet):
    """Same link positions in the default pose: both libraries read the URDF the same way."""
    profile = profile_of(robot)
    model = pin_model(profile)
    data = model.createData()
    q = pinocchio.neutral(model)
    for spec in profile.joints:
        q[model.joints[model.getJointId(spec.name)].idx_q] = spec.default
    if not profile.fixed_base:
        q[2] = profile.spawn_height  # free flyer: xyz, then quaternion (identity in neutral)
    pinocchio.framesForwardKinematics(model, data, q)
    bullet.set_default_pose()
    links = list(profile.foot_links) + ([profile.end_effector_link] if profile.end_effector_link else [])
    assert links
    for link in links:
        expected = data.oMf[model.getFrameId(link)].translation
        assert bullet.link_position(link) == pytest.approx(expected, abs=1e-6), link


# ----------------------------------------------------------------------------- go2


def test_go2_geometry_in_zero_pose():
    """Zero pose: legs straight down, feet at hip offset + thigh offset, 2 x 0.213 m below."""
    profile = profile_of("go2")
    model = pin_model(profile)
    data = model.createData()
    pinocchio.framesForwardKinematics(model, data, pinocchio.neutral(model))
    for leg, sx, sy in (("FL", 1, 1), ("FR", 1, -1), ("RL", -1, 1), ("RR", -1, -1)):
        foot = data.oMf[model.getFrameId(f"{leg}_foot")].translation
        assert foot == pytest.approx([sx * 0.1934, sy * (0.0465 + 0.0955), -0.426], abs=1e-9), leg


def test_go2_knees_point_backwards_in_default_pose():
    profile = profile_of("go2")
    model = pin_model(profile)
    data = model.createData()
    q = pinocchio.neutral(model)
    q[7:] = profile.default_positions
    pinocchio.forwardKinematics(model, data, q)
    for leg in ("FL", "FR", "RL", "RR"):
        hip = data.oMi[model.getJointId(f"{leg}_thigh_joint")].translation
        knee = data.oMi[model.getJointId(f"{leg}_calf_joint")].translation
        assert knee[0] < hip[0], f"{leg}: the knee should be behind the hip"
        assert knee[2] < hip[2], leg


def test_go2_default_pose_touches_ground_at_spawn_height():
    profile = profile_of("go2")
    sim = Bullet(profile)
    try:
        sim.set_default_pose()
        for foot in profile.foot_links:
            radius = sim.sphere_radius(foot)
            assert radius == pytest.approx(0.022, abs=0.005)
            z = sim.link_position(foot)[2]
            assert radius - 0.005 <= z <= radius + 0.03, f"{foot}: centre at {z:.4f} m, ground contact at {radius} m"
    finally:
        sim.close()


def test_go2_stands_under_pd_control():
    """Dropped at spawn height and held by the profile's PD gains, the Go2 settles upright on its feet."""
    profile = profile_of("go2")
    sim = Bullet(profile)
    cid, body = sim.cid, sim.body
    try:
        ids = sim.set_default_pose()
        p.setTimeStep(profile.physics_period, physicsClientId=cid)
        p.setJointMotorControlArray(body, ids, p.VELOCITY_CONTROL, forces=[0.0] * len(ids), physicsClientId=cid)
        for _ in range(int(1.5 / profile.physics_period)):
            states = p.getJointStates(body, ids, physicsClientId=cid)
            q = np.array([s[0] for s in states])
            dq = np.array([s[1] for s in states])
            tau = profile.kp * (profile.default_positions - q) - profile.kd * dq
            tau = np.clip(tau, -profile.effort_limits, profile.effort_limits)
            p.setJointMotorControlArray(body, ids, p.TORQUE_CONTROL, forces=tau, physicsClientId=cid)
            p.stepSimulation(physicsClientId=cid)
        position, orientation = p.getBasePositionAndOrientation(body, physicsClientId=cid)
        roll, pitch, _ = p.getEulerFromQuaternion(orientation)
        assert abs(roll) < 0.1 and abs(pitch) < 0.1
        assert 0.2 < position[2] < profile.spawn_height
        for foot in profile.foot_links:
            assert sim.link_position(foot)[2] == pytest.approx(sim.sphere_radius(foot), abs=0.005), foot
        touching = {c[3] for c in p.getContactPoints(body, sim.plane, physicsClientId=cid)}
        assert touching == {sim.link_index[f] for f in profile.foot_links}, "only the feet should touch the ground"
    finally:
        sim.close()


# ----------------------------------------------------------------------------- panda


def test_panda_flange_position_matches_published_dh():
    """Zero pose: flange at (a7, 0, d1 + d3 + d5 - d_flange) = (0.088, 0, 0.926) m."""
    profile = profile_of("panda")
    model = pin_model(profile)
    data = model.createData()
    pinocchio.framesForwardKinematics(model, data, pinocchio.neutral(model))
    hand = data.oMf[model.getFrameId("panda_hand")]
    assert hand.translation == pytest.approx([0.088, 0.0, 0.333 + 0.316 + 0.384 - 0.107], abs=1e-9)
    # the hand points down in the zero pose (its z axis along -z of the world)
    assert hand.rotation[:, 2] == pytest.approx([0, 0, -1], abs=1e-9)
    # elbow joint 4 sits a4 = 0.0825 m out from the column, d1 + d3 up
    elbow = data.oMi[model.getJointId("panda_joint4")].translation
    assert elbow == pytest.approx([0.0825, 0.0, 0.649], abs=1e-9)


def test_panda_ready_pose_hand_in_front_of_base():
    profile = profile_of("panda")
    model = pin_model(profile)
    data = model.createData()
    pinocchio.framesForwardKinematics(model, data, profile.default_positions)
    hand = data.oMf[model.getFrameId("panda_hand")]
    assert hand.translation == pytest.approx([0.307, 0.0, 0.590], abs=0.005)
    assert hand.rotation[:, 2] == pytest.approx([0, 0, -1], abs=0.01)


# ----------------------------------------------------------------------------- error messages


def _write_go2_variant(tmp_path: Path, text: str) -> Path:
    """A profile under <tmp>/config/robots/ with the URDF copied to <tmp>/urdf/."""
    (tmp_path / "urdf").mkdir(exist_ok=True)
    shutil.copy(ROOT / "urdf" / "go2.urdf", tmp_path / "urdf" / "go2.urdf")
    robots = tmp_path / "config" / "robots"
    robots.mkdir(parents=True, exist_ok=True)
    path = robots / "bad.yaml"
    path.write_text(text)
    return path


GO2_TEXT = (ROOT / "config" / "robots" / "go2.yaml").read_text()


def _joint_line(name: str) -> str:
    return next(line for line in GO2_TEXT.splitlines() if f"name: {name}," in line)


def _swap_lines(text: str, a: str, b: str) -> str:
    la, lb = _joint_line(a), _joint_line(b)
    return text.replace(la, "@@A@@").replace(lb, la).replace("@@A@@", lb)


BAD_PROFILES = {
    "unknown joint": (
        GO2_TEXT.replace("name: FL_hip_joint,", "name: FL_hipp_joint,"),
        "joints[0] (FL_hipp_joint).name",
        "FL_hipp_joint",
    ),
    "missing urdf": (
        GO2_TEXT.replace("urdf: urdf/go2.urdf", "urdf: urdf/go2_missing.urdf"),
        "urdf",
        "go2_missing.urdf",
    ),
    "joint count": (GO2_TEXT.replace(_joint_line("RR_calf_joint") + "\n", ""), "joints", "RR_calf_joint"),
    "joint order": (_swap_lines(GO2_TEXT, "FL_hip_joint", "FL_thigh_joint"), "joints", "order"),
    "default outside limits": (
        GO2_TEXT.replace(
            _joint_line("FL_calf_joint"), _joint_line("FL_calf_joint").replace("default: -1.5", "default: 0.5")
        ),
        "joints[2] (FL_calf_joint).default",
        "outside",
    ),
    "bad yaml": (GO2_TEXT.replace("kind: quadruped", "kind: [quadruped"), "(file)", "YAML"),
    "a required number written as null": (
        GO2_TEXT.replace("damping_kd: 1.0 ", "damping_kd: null "),
        "damping_kd",
        "null",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profiles_give_clear_errors(tmp_path, case):
    text, field, detail = BAD_PROFILES[case]
    assert text != GO2_TEXT, f"test setup: the {case!r} edit did not change the profile"
    path = _write_go2_variant(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    error = caught.value
    message = str(error)
    assert str(path) in message
    assert f": {field}: " in message
    assert error.field == field
    assert detail in message
    assert "Fix:" in message and message.split("Fix:", 1)[1].strip()


def test_unmodified_copy_loads(tmp_path):
    """Control for the error tests: the copied profile itself is fine."""
    profile = load_profile(_write_go2_variant(tmp_path, GO2_TEXT))
    assert profile.urdf == tmp_path / "urdf" / "go2.urdf"


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(ProfileError) as caught:
        load_profile("no_such_robot")
    message = str(caught.value)
    assert "no_such_robot" in message and "Fix:" in message
    assert "go2" in message and "panda" in message


def test_a_folder_named_like_a_robot_does_not_hide_its_profile(tmp_path, monkeypatch):
    """`sim2real train --out go2` makes ./go2; the next command's --robot go2 is still the profile,
    and so is a randomization's name; an extensionless file given as a path is still that file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "go2").mkdir()
    (tmp_path / "go2_reference").mkdir()
    assert load_profile("go2").name == "go2"
    assert load_randomization("go2_reference").parameters
    custom = _write_go2_variant(tmp_path, GO2_TEXT).with_suffix("")
    _write_go2_variant(tmp_path, GO2_TEXT).rename(custom)
    assert load_profile(custom).source == custom


def test_spec_mass_is_documented():
    """The profiles' spec masses are the cited totals (guards against silent edits)."""
    assert profile_of("go2").spec_mass == pytest.approx(15.0)
    gaz = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522]
    assert profile_of("panda").spec_mass == pytest.approx(math.fsum(gaz) + 0.73, abs=1e-6)
