"""The observation layout contract and the shared forward kinematics (no ROS)."""

from __future__ import annotations

import json

import numpy as np
import pybullet as pb
import pytest
from scipy.spatial.transform import Rotation

from sim2real.core.kinematics import Kinematics
from sim2real.core.observation import VOCABULARY, ObservationSpec, ObservationTerm, RobotSignals, term_size
from sim2real.core.robot_profile import load_profile
from sim2real.sim.world import SimWorld

GO2_LAYOUT = [
    {"name": "base_ang_vel", "scale": 0.25},
    {"name": "projected_gravity", "scale": 1.0},
    {"name": "velocity_command", "scale": 1.0},
    {"name": "joint_pos_rel", "scale": 1.0},
    {"name": "joint_vel", "scale": 0.05},
    {"name": "last_action", "scale": 1.0},
]


def go2_spec() -> ObservationSpec:
    return ObservationSpec.from_config(GO2_LAYOUT, num_joints=12)


def signals(n: int = 12, **overrides) -> RobotSignals:
    rng = np.random.default_rng(0)
    values = dict(
        joint_position=rng.normal(size=n),
        joint_velocity=rng.normal(size=n),
        base_orientation=np.array([0.0, 0.0, 0.0, 1.0]),
        base_angular_velocity=np.array([0.4, -0.8, 1.2]),
        base_linear_velocity=np.array([0.5, 0.1, 0.0]),
        velocity_command=np.array([0.5, 0.0, 0.2]),
        goal_position=np.array([0.5, 0.1, 0.4]),
        end_effector_position=np.array([0.3, 0.0, 0.6]),
        last_action=rng.normal(size=n),
        default_joint_position=rng.normal(size=n),
        gait_phase=0.25,
    )
    values.update(overrides)
    return RobotSignals(**values)


def test_layout_sizes_and_slices():
    spec = go2_spec()
    assert spec.size == 3 + 3 + 3 + 12 + 12 + 12 == 45
    slices = spec.slices()
    assert list(slices) == [e["name"] for e in GO2_LAYOUT]
    assert slices["joint_pos_rel"] == slice(9, 21) and slices["last_action"] == slice(33, 45)
    assert term_size("goal_offset", 7) == 3 and term_size("joint_pos", 7) == 7


def test_observe_scales_and_concatenates_in_order():
    s = signals()
    obs = go2_spec().observe(s)
    assert obs.dtype == np.float32 and obs.shape == (45,)
    sl = go2_spec().slices()
    np.testing.assert_allclose(obs[sl["base_ang_vel"]], 0.25 * s.base_angular_velocity, rtol=1e-6)
    np.testing.assert_allclose(obs[sl["projected_gravity"]], [0, 0, -1], atol=1e-7)
    np.testing.assert_allclose(obs[sl["joint_pos_rel"]], s.joint_position - s.default_joint_position, rtol=1e-5)
    np.testing.assert_allclose(obs[sl["joint_vel"]], 0.05 * s.joint_velocity, rtol=1e-5)
    np.testing.assert_allclose(obs[sl["last_action"]], s.last_action, rtol=1e-6)


def test_observe_returns_a_new_array_each_time():
    spec = go2_spec()
    first = spec.observe(signals())
    kept = first.copy()
    spec.observe(signals(last_action=np.ones(12)))
    np.testing.assert_array_equal(first, kept)


@pytest.mark.parametrize(
    "quaternion",
    [
        Rotation.from_euler("x", 30, degrees=True).as_quat(),
        Rotation.from_euler("xyz", [20, -35, 70], degrees=True).as_quat(),
        Rotation.random(random_state=3).as_quat(),
    ],
)
def test_projected_gravity_of_a_tilted_base(quaternion):
    spec = ObservationSpec([ObservationTerm("projected_gravity", 3, 1.0)])
    obs = spec.observe(RobotSignals(base_orientation=quaternion))
    expected = Rotation.from_quat(quaternion).inv().apply([0.0, 0.0, -1.0])  # world gravity in the body frame
    np.testing.assert_allclose(obs, expected, atol=1e-6)


def test_projected_gravity_by_hand_for_a_roll():
    # Rolled 30 deg about x (left side up): gravity seen by the body gains a -y component.
    q = Rotation.from_euler("x", 30, degrees=True).as_quat()
    spec = ObservationSpec([ObservationTerm("projected_gravity", 3, 1.0)])
    np.testing.assert_allclose(spec.observe(RobotSignals(base_orientation=q)), [0.0, -0.5, -np.sqrt(3) / 2], atol=1e-6)


@pytest.mark.parametrize(
    "orientation", [(0.0, 0.0, 1.0), np.zeros(4), np.array([[0.0, 0.0, 0.0, 1.0]]), (0.0, 0.0, 0.0, 1.0, 0.0)]
)
def test_projected_gravity_refuses_what_is_not_a_quaternion_by_name(orientation):
    spec = ObservationSpec([ObservationTerm("projected_gravity", 3, 1.0)])
    with pytest.raises(
        ValueError,
        match=r"observation term 'projected_gravity': base_orientation .* is not a "
        r"quaternion \(x, y, z, w\)",
    ):
        spec.observe(RobotSignals(base_orientation=orientation))


def test_goal_offset_and_arm_terms():
    spec = ObservationSpec.from_config(
        [
            {"name": "ee_position", "scale": 1.0},
            {"name": "goal_position", "scale": 2.0},
            {"name": "goal_offset", "scale": 1.0},
        ],
        num_joints=7,
    )
    s = signals(7)
    obs = spec.observe(s)
    np.testing.assert_allclose(obs[6:9], s.goal_position - s.end_effector_position, rtol=1e-6)
    np.testing.assert_allclose(obs[3:6], 2.0 * s.goal_position, rtol=1e-6)


def test_missing_signal_is_named():
    with pytest.raises(ValueError, match="needs signal 'velocity_command'"):
        go2_spec().observe(signals(velocity_command=None))


def test_wrong_signal_size_is_refused():
    with pytest.raises(ValueError, match="joint_vel.*expects 12 values"):
        go2_spec().observe(signals(joint_velocity=np.zeros(7)))
    with pytest.raises(ValueError, match="last_action.*expects 12"):
        go2_spec().observe(signals(last_action=0.0))


def test_unknown_and_malformed_terms():
    with pytest.raises(ValueError, match="unknown observation term 'base_acc'.*known terms"):
        ObservationSpec([ObservationTerm("base_acc", 3, 1.0)])
    with pytest.raises(ValueError, match="listed twice"):
        ObservationSpec([ObservationTerm("joint_vel", 12, 1.0), ObservationTerm("joint_vel", 12, 1.0)])
    with pytest.raises(ValueError, match="has size 3"):
        ObservationSpec([ObservationTerm("base_ang_vel", 4, 1.0)])
    with pytest.raises(ValueError, match="size 7 given"):
        ObservationSpec.from_config([{"name": "joint_vel", "size": 7, "scale": 1.0}], num_joints=12)
    with pytest.raises(ValueError, match="unknown keys"):
        ObservationSpec.from_config([{"name": "joint_vel", "scael": 1.0}], num_joints=12)


def test_every_vocabulary_term_computes():
    spec = ObservationSpec.from_config([{"name": name} for name in VOCABULARY], num_joints=12)
    obs = spec.observe(signals())
    assert obs.shape == (spec.size,) and np.all(np.isfinite(obs))


def test_gait_clock_is_sin_and_cos_of_the_phase():
    spec = ObservationSpec.from_config([{"name": "gait_clock", "size": 2}], num_joints=12)
    assert spec.size == 2
    np.testing.assert_allclose(spec.observe(signals(gait_phase=0.25)), [1.0, 0.0], atol=1e-7)
    np.testing.assert_allclose(spec.observe(signals(gait_phase=1.5)), [0.0, -1.0], atol=1e-7)
    with pytest.raises(ValueError, match="size 2, not 3"):
        ObservationSpec([ObservationTerm("gait_clock", 3, 1.0)])


def test_metadata_round_trip():
    spec = go2_spec()
    text = spec.to_metadata()
    assert json.loads(text)["terms"][4] == {"name": "joint_vel", "size": 12, "scale": 0.05}
    again = ObservationSpec.from_metadata(text)
    assert again == spec and again.differences(spec) == []
    np.testing.assert_array_equal(again.observe(signals()), spec.observe(signals()))


def test_metadata_errors():
    with pytest.raises(ValueError, match="not valid JSON"):
        ObservationSpec.from_metadata("{")
    with pytest.raises(ValueError, match="version"):
        ObservationSpec.from_metadata(json.dumps({"format": "sim2real.observation", "version": 99, "terms": []}))


def _edited(change) -> ObservationSpec:
    entries = [dict(e) for e in GO2_LAYOUT]
    change(entries)
    return ObservationSpec.from_config(entries, num_joints=12)


def test_differences_report_order_size_scale_and_names():
    spec = go2_spec()

    swapped = _edited(lambda e: e.__setitem__(slice(0, 2), [e[1], e[0]]))
    assert any("order" in d for d in spec.differences(swapped))

    rescaled = _edited(lambda e: e[4].__setitem__("scale", 0.1))
    assert spec.differences(rescaled) == ["term 'joint_vel': scale 0.05 here vs 0.1 in the other"]

    renamed = _edited(lambda e: e[2].__setitem__("name", "base_lin_vel"))
    problems = spec.differences(renamed)
    assert any("'velocity_command' is in this layout but not in the other" in d for d in problems)
    assert any("'base_lin_vel' is in the other layout" in d for d in problems)

    seven = ObservationSpec.from_config(GO2_LAYOUT, num_joints=7)
    sizes = spec.differences(seven)
    assert "term 'joint_pos_rel': size 12 here vs 7 in the other" in sizes and len(sizes) == 3
    assert spec != seven


# ----------------------------------------------------------------- kinematics
def _pybullet_positions_in_base(world: SimWorld, links: list[str]) -> np.ndarray:
    c, robot = world.client, world.robot
    index = {
        pb.getJointInfo(robot, i, physicsClientId=c)[12].decode(): i
        for i in range(pb.getNumJoints(robot, physicsClientId=c))
    }
    base_position, base_orientation = world.base_pose()
    rotation = Rotation.from_quat(base_orientation)
    out = []
    for link in links:
        state = pb.getLinkState(robot, index[link], computeForwardKinematics=1, physicsClientId=c)
        out.append(rotation.inv().apply(np.array(state[4]) - base_position))
    return np.array(out)


def _random_poses(profile, rng, count):
    lower, upper = profile.lower_limits, profile.upper_limits
    return [rng.uniform(lower, upper) for _ in range(count)]


def test_fk_matches_pybullet_for_the_panda_hand():
    profile = load_profile("panda")
    kinematics = Kinematics(profile)
    with SimWorld(profile) as world:
        for q in [profile.default_positions, *_random_poses(profile, np.random.default_rng(1), 5)]:
            world.reset(joint_positions=q)
            expected = _pybullet_positions_in_base(world, [profile.end_effector_link])[0]
            np.testing.assert_allclose(kinematics.end_effector_position(q), expected, atol=1e-6)


def test_fk_matches_pybullet_for_the_go2_feet_with_a_tilted_base():
    profile = load_profile("go2")
    kinematics = Kinematics(profile)
    with SimWorld(profile) as world:
        rng = np.random.default_rng(2)
        for q in [profile.default_positions, *_random_poses(profile, rng, 5)]:
            # The base pose must not matter: positions are in the base frame.
            world.reset(
                joint_positions=q,
                base_position=(0.3, -0.2, 1.0),
                base_orientation=Rotation.random(random_state=rng).as_quat(),
            )
            expected = _pybullet_positions_in_base(world, list(profile.foot_links))
            np.testing.assert_allclose(kinematics.foot_positions(q), expected, atol=1e-6)


def test_fk_errors_name_the_problem():
    with pytest.raises(ValueError, match="no end_effector_link"):
        Kinematics(load_profile("go2")).end_effector_position(np.zeros(12))
    with pytest.raises(ValueError, match="no foot_links"):
        Kinematics(load_profile("panda")).foot_positions(np.zeros(7))
