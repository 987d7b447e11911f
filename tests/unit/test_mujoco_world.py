"""The MuJoCo world: SimWorld's interface on another engine, and the named conditions changing
its behaviour the way they change PyBullet's."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import quat_to_matrix
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import ENGINES, check_engine, make_world
from sim2real.sim.mujoco_world import MujocoWorld
from sim2real.sim.world import GRAVITY, SimWorld

GO2 = load_profile("go2")
PANDA = load_profile("panda")
BOTH = pytest.mark.parametrize("engine", ENGINES)


def stand(world, seconds: float = 2.0) -> None:
    world.reset()
    world.step(round(seconds / world.physics_period))


def base_height(world) -> float:
    return float(world.base_pose()[0][2])


def test_the_engine_registry_names_both_engines_and_refuses_others():
    assert isinstance(make_world("pybullet", GO2), SimWorld)
    assert isinstance(make_world("mujoco", GO2), MujocoWorld)
    with pytest.raises(ValueError, match="unknown physics engine 'bullet'.*pybullet, mujoco"):
        check_engine("bullet")


@BOTH
def test_the_go2_stands_on_its_feet_carrying_its_weight(engine):
    world = make_world(engine, GO2)
    stand(world, 3.0)
    assert 0.22 < base_height(world) < 0.32
    assert world.foot_contacts().all()
    weight = world.total_mass() * GRAVITY
    assert world.foot_normal_forces().sum() == pytest.approx(weight, rel=0.05)
    assert world.total_mass() == pytest.approx(15.018, abs=1e-3)


@BOTH
def test_the_imu_reads_gravity_up_and_no_rotation_at_rest(engine):
    world = make_world(engine, GO2)
    stand(world, 4.0)
    imu = world.imu()
    assert imu.linear_acceleration[2] == pytest.approx(GRAVITY, abs=0.3)
    assert np.abs(imu.angular_velocity).max() < 0.05
    # The IMU sits on the trunk: its orientation is the base's.
    _, base = world.base_pose()
    assert np.abs(quat_to_matrix(imu.orientation) - quat_to_matrix(base)).max() < 1e-6


def test_same_seed_and_calls_give_bitwise_identical_runs():
    conditions = PhysicalConditions(terrain_roughness=0.02, joint_position_noise=0.01, gyro_noise=0.01)

    def run():
        world = MujocoWorld(GO2, conditions, seed=7)
        world.reset()
        readings = []
        for k in range(50):
            world.command(GO2.default_positions + 0.2 * np.sin(0.1 * k))
            world.step(10)
            readings.append(
                np.concatenate([world.joint_state().position, world.imu().angular_velocity, world.base_pose()[0]])
            )
        return np.array(readings)

    assert np.array_equal(run(), run())


def test_the_terrain_is_the_same_draw_as_pybullets_for_a_seed():
    conditions = PhysicalConditions(terrain_roughness=0.03)
    bullet = SimWorld(GO2, conditions, seed=5).terrain_heights
    mujoco_heights = MujocoWorld(GO2, conditions, seed=5).terrain_heights
    # PyBullet pins two corner samples to keep its height field centred (see world._Ground).
    bullet[0, :2] = mujoco_heights[0, :2]
    assert np.array_equal(bullet, mujoco_heights)


def test_the_robot_spawns_above_rough_ground_and_stands_on_it():
    world = MujocoWorld(GO2, PhysicalConditions(terrain_roughness=0.04), seed=2)
    stand(world, 2.0)
    assert world.foot_contacts().sum() >= 3
    assert base_height(world) > 0.18


def _height_under(world, condition: str, value) -> float:
    world.set_condition(condition, value)
    stand(world, 2.0)
    return base_height(world)


@BOTH
@pytest.mark.parametrize("condition, value", [("mass_scale", 1.6), ("motor_strength", 0.6)])
def test_a_heavier_or_weaker_robot_stands_lower_in_both_engines(engine, condition, value):
    nominal = _height_under(make_world(engine, GO2), condition, getattr(PhysicalConditions(), condition))
    changed = _height_under(make_world(engine, GO2), condition, value)
    assert changed < nominal - 0.01, f"{condition}={value}: {changed:.3f} m against {nominal:.3f} m nominal"


@BOTH
def test_latency_delays_a_command_by_its_value(engine):
    def first_move(latency: float) -> float:
        world = make_world(engine, PANDA, conditions=PhysicalConditions(latency=latency))
        world.reset()
        start = world.true_joint_state().position[0]
        world.command(PANDA.default_positions + 0.5)
        for step in range(200):
            world.step(1)
            if abs(world.true_joint_state().position[0] - start) > 1e-4:
                return step * world.physics_period
        return float("inf")

    assert first_move(0.04) - first_move(0.0) == pytest.approx(0.04, abs=0.005)


@BOTH
@pytest.mark.parametrize(
    "condition, value, step", [("joint_damping", 3.0, 0.3), ("joint_friction", 2.0, 0.3), ("armature", 0.1, 0.3)]
)
def test_joint_losses_and_armature_slow_a_joint_step_in_both_engines(engine, condition, value, step):
    def travel(conditions: PhysicalConditions) -> float:
        world = make_world(engine, GO2, conditions=conditions, suspended=True)
        world.reset()
        target = GO2.default_positions.copy()
        target[2] += step  # a hanging calf: light, so losses, rotor inertia and torque limits show
        world.command(target)
        world.step(25)
        return abs(world.true_joint_state().position[2] - GO2.default_positions[2])

    nominal = travel(PhysicalConditions())
    changed = travel(PhysicalConditions(**{condition: value}))
    assert changed < 0.8 * nominal, f"{condition}={value}: {changed:.3f} rad against {nominal:.3f} rad nominal"


@BOTH
def test_a_flat_battery_caps_the_motor_torque_in_both_engines(engine):
    world = make_world(engine, GO2, conditions=PhysicalConditions(battery_voltage=6.0), suspended=True)
    world.reset()
    target = GO2.default_positions.copy()
    target[2] += 1.0  # 20 N*m of PD torque, above the sagged limit
    world.command(target)
    world.step(1)
    scale = 6.0 / GO2.battery_nominal_voltage
    assert world.torque_limit_scale == pytest.approx(scale)
    assert world.true_joint_state().effort[2] == pytest.approx(GO2.effort_limits[2] * scale)


@BOTH
def test_joint_speed_stops_at_the_profiles_velocity_limit(engine):
    world = make_world(engine, PANDA)
    world.reset()
    target = PANDA.default_positions.copy()
    target[6] += 1.0  # the wrist's PD alone would swing it far faster than its 2.61 rad/s
    world.command(target)
    world.step(25)
    assert abs(world.true_joint_state().velocity[6]) <= PANDA.velocity_limits[6] + 1e-6
    assert abs(world.true_joint_state().position[6] - PANDA.default_positions[6]) <= 25 * 0.002 * 2.61 + 1e-3


@BOTH
def test_low_ground_friction_lets_a_pushed_robot_slide_further(engine):
    def slide(friction: float) -> float:
        world = make_world(engine, GO2, conditions=PhysicalConditions(ground_friction=friction))
        stand(world, 1.0)
        world.apply_push([60.0, 0.0, 0.0], 0.3)
        world.step(500)
        return float(world.base_pose()[0][0])

    assert slide(0.1) > slide(1.0) + 0.05


@BOTH
def test_sensor_noise_reaches_the_readings_not_the_truth(engine):
    world = make_world(engine, GO2, conditions=PhysicalConditions(joint_position_noise=0.05, gyro_noise=0.1))
    stand(world, 0.5)
    true = world.true_joint_state()
    noisy = world.joint_state(true)
    assert 0.01 < np.std(noisy.position - true.position) < 0.15
    assert np.abs(world.imu().angular_velocity).max() > 0.02


@BOTH
def test_a_suspended_go2_hangs_where_it_was_put(engine):
    world = make_world(engine, GO2, suspended=True)
    world.reset()
    start = base_height(world)
    world.command(GO2.default_positions + 0.3)
    world.step(1000)
    assert base_height(world) == pytest.approx(start, abs=1e-3)
    assert not world.foot_contacts().any()


@BOTH
def test_the_panda_holds_its_pose_with_its_controllers_gravity_compensation(engine):
    world = make_world(engine, PANDA)
    world.reset()
    world.step(1000)
    assert np.abs(world.true_joint_state().position - PANDA.default_positions).max() < 0.01


@BOTH
def test_links_contacts_and_foot_spheres_read_alike_in_both_engines(engine):
    world = make_world(engine, GO2)
    stand(world, 1.0)
    links = world.link_ids
    feet = [links[name] for name in GO2.foot_links]
    assert [world.collision_sphere_radius(foot) for foot in feet] == pytest.approx([0.022] * 4)
    assert world.collision_sphere_radius(links["base"]) == 0.0
    positions = world.link_positions(feet)
    assert positions.shape == (4, 3)
    assert np.abs(positions[:, 2] - 0.022).max() < 0.01  # sphere centres one radius above the ground
    touching = {link for link, force in world.ground_contacts() if force > 0}
    assert touching == set(feet)


def test_a_model_that_does_not_load_is_refused_with_the_fix(tmp_path):
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='base'/>")
    with pytest.raises(ValueError, match="(?s)MuJoCo cannot load this model.*Fix: give a valid URDF or MJCF"):
        MujocoWorld(GO2, model=broken)


def test_a_model_without_the_profiles_joints_is_refused_by_name(tmp_path):
    other = tmp_path / "other.xml"
    other.write_text(
        "<mujoco><worldbody><body name='base'><freejoint/><geom size='0.1'/>"
        "<body name='imu'/></body></worldbody></mujoco>"
    )
    with pytest.raises(ValueError, match=r"joints \['FL_hip_joint'.*not in the model"):
        MujocoWorld(GO2, model=other)


@BOTH
def test_a_condition_changed_mid_run_keeps_the_robot_where_it_is(engine):
    world = make_world(engine, GO2)
    stand(world, 0.5)
    before = world.true_joint_state().position
    pose = world.base_pose()[0]
    for name, value in (
        ("battery_voltage", 24.0),
        ("mass_scale", 1.1),
        ("armature", 0.01),
        ("joint_friction", 0.1),
        ("latency", 0.01),
    ):
        world.set_condition(name, value)
        assert np.abs(world.true_joint_state().position - before).max() < 1e-9, name
        assert np.abs(world.base_pose()[0] - pose).max() < 1e-9, name
    world.step(100)
    assert base_height(world) > 0.2


def test_a_roughness_the_mujoco_world_cannot_take_is_refused_before_anything_changes():
    world = MujocoWorld(GO2)
    with pytest.raises(ValueError, match="at most 0.5 m. Fix: a lower roughness, or the pybullet engine"):
        world.set_conditions(ground_friction=0.3, terrain_roughness=0.8)
    assert world.conditions.ground_friction == 0.8 and world.conditions.terrain_roughness == 0.0
    with pytest.raises(ValueError, match="at most 0.5 m"):
        MujocoWorld(GO2, PhysicalConditions(terrain_roughness=0.6))


def test_the_height_field_is_where_the_heights_say_in_both_engines():
    import mujoco
    import pybullet as pb

    from sim2real.sim.world import TERRAIN_CELL

    conditions = PhysicalConditions(terrain_roughness=0.04)
    ours, theirs = SimWorld(GO2, conditions, seed=4), MujocoWorld(GO2, conditions, seed=4)
    heights = theirs.terrain_heights
    n = heights.shape[0]
    geom = np.zeros(1, dtype=np.int32)
    for i, j in ((20, 31), (140, 9), (77, 120), (3, 150)):  # away from the robot at the centre
        x, y = (i - (n - 1) / 2) * TERRAIN_CELL, (j - (n - 1) / 2) * TERRAIN_CELL
        distance = mujoco.mj_ray(
            theirs.model, theirs.data, np.array([x, y, 1.0]), np.array([0, 0, -1.0]), None, 1, -1, geom
        )
        hit = pb.rayTest([x, y, 1.0], [x, y, -1.0], physicsClientId=ours.client)[0][3]
        assert 1.0 - distance == pytest.approx(heights[j, i], abs=1e-4)
        assert hit[2] == pytest.approx(heights[j, i], abs=1e-4)


def test_a_model_with_visual_geoms_and_its_own_losses_keeps_them(tmp_path):
    model = tmp_path / "arm.xml"
    joints = "".join(
        f"<body name='l{k}' pos='0 0 0.1'><joint name='{name}' axis='0 0 1' armature='0.05' "
        f"damping='0.3'/><geom size='0.02' mass='1'/><geom size='0.3' contype='0' conaffinity='0'/>"
        for k, name in enumerate(PANDA.joint_names)
    )
    model.write_text(
        f"<mujoco><worldbody><body name='{PANDA.base_link}'><geom size='0.05' mass='1'/>{joints}"
        + "</body>" * len(PANDA.joint_names)
        + f"<body name='{PANDA.end_effector_link}'/>"
        "</body></worldbody></mujoco>"
    )
    world = MujocoWorld(
        PANDA, PhysicalConditions(armature=0.01, joint_damping=0.2), model=model, gravity_compensation=False
    )
    m = world.model
    dofs = [m.joint(name).dofadr[0] for name in PANDA.joint_names]
    assert m.dof_armature[dofs] == pytest.approx([0.06] * 7) and m.dof_damping[dofs] == pytest.approx([0.5] * 7)
    # Visual-only geoms (contype = conaffinity = 0) are dropped as visuals, never made to collide.
    assert not [g for g in range(m.ngeom) if m.geom_size[g, 0] == pytest.approx(0.3)]
