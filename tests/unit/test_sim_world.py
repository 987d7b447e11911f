"""SimWorld, Actuator and PhysicalConditions against real PyBullet physics (no ROS)."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from sim2real.core.robot_profile import load_profile
from sim2real.sim.actuator import Actuator
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.world import SUSPENSION_CLEARANCE, TERRAIN_CELL, SimWorld


@pytest.fixture(scope="module")
def go2():
    return load_profile("go2")


@pytest.fixture(scope="module")
def panda():
    return load_profile("panda")


def make_world(profile, seed=0, **conditions):
    return SimWorld(profile, PhysicalConditions(**conditions), seed=seed)


def step_response_time(world: SimWorld, joint: int, offset: float) -> float:
    """Seconds from a step command on one joint until that joint's torque changes."""
    world.step(50)
    before = world.true_joint_state().effort[joint]
    target = world.profile.default_positions.copy()
    target[joint] += offset
    commanded_at = world.time
    world.command(target)
    for _ in range(200):
        world.step()
        if abs(world.true_joint_state().effort[joint] - before) > 1e-6:
            return world.time - commanded_at
    raise AssertionError("the joint never responded")


def coast_distance(world: SimWorld, joint: int, kick: float) -> float:
    """Angle a joint travels after a 0.1 s torque kick with its PD gains at zero."""
    kp, kd = world.profile.kp.copy(), world.profile.kd.copy()
    kp[joint] = kd[joint] = 0.0
    effort = np.zeros(world.profile.num_joints)
    effort[joint] = kick
    start = world.true_joint_state().position[joint]
    world.command(world.profile.default_positions, effort=effort, kp=kp, kd=kd)
    world.step(50)
    world.command(world.profile.default_positions, kp=kp, kd=kd)
    world.step(250)
    return abs(world.true_joint_state().position[joint] - start)


# ---------------------------------------------------------------- determinism
def test_same_seed_same_trajectory_bitwise_and_worlds_do_not_interfere(go2):
    conditions = dict(terrain_roughness=0.02, joint_position_noise=0.01, gyro_noise=0.01, latency=0.006)
    a, b = make_world(go2, seed=7, **conditions), make_world(go2, seed=7, **conditions)
    try:
        rng = np.random.default_rng(0)
        for k in range(40):
            target = go2.default_positions + rng.normal(0.0, 0.1, go2.num_joints)
            if k == 10:
                a.apply_push([30.0, 0.0, 0.0], 0.05)
                b.apply_push([30.0, 0.0, 0.0], 0.05)
            for world in (a, b):  # interleaved: one world's calls must not touch the other
                world.command(target)
                world.step(5)
            ta, tb = a.true_joint_state(), b.true_joint_state()
            assert np.array_equal(ta.position, tb.position) and np.array_equal(ta.velocity, tb.velocity)
            assert np.array_equal(a.joint_state().position, b.joint_state().position)
            assert np.array_equal(a.imu().angular_velocity, b.imu().angular_velocity)
        assert np.array_equal(a.base_pose()[0], b.base_pose()[0])
    finally:
        a.close()
        b.close()


def test_different_seed_gives_different_noise_on_the_same_physics(go2):
    a, b = make_world(go2, seed=1, joint_position_noise=0.01), make_world(go2, seed=2, joint_position_noise=0.01)
    try:
        for world in (a, b):
            world.step(20)
        assert np.array_equal(a.true_joint_state().position, b.true_joint_state().position)
        assert not np.array_equal(a.joint_state().position, b.joint_state().position)
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------ conditions
def test_more_ground_friction_means_less_slip_under_a_push(go2):
    # 50 N for 0.3 s: above what friction 0.2 holds (0.2 * 147 N = 29 N), below what tips the
    # soft-gained (kp 20) Go2 over on grippy ground; at 60 N+ it rolls over its feet instead.
    displacement = {}
    for friction in (0.2, 1.0):
        with make_world(go2, ground_friction=friction) as world:
            world.step(500)
            start = world.base_pose()[0]
            world.apply_push([0.0, 50.0, 0.0], 0.3)
            world.step(500)
            position = world.base_pose()[0]
            displacement[friction] = abs(position[1] - start[1])
            assert position[2] > 0.2, f"the Go2 fell at friction {friction}"
    assert displacement[0.2] > 0.05
    assert displacement[1.0] < 0.5 * displacement[0.2], displacement


def test_latency_delays_the_response_by_that_time(panda):
    with make_world(panda, latency=0.0) as world:
        prompt = step_response_time(world, joint=0, offset=0.1)
    with make_world(panda, latency=0.02) as world:
        delayed = step_response_time(world, joint=0, offset=0.1)
    assert delayed - prompt == pytest.approx(0.02, abs=panda.physics_period)


def test_latency_queue_delivers_the_latest_due_command():
    actuator = Actuator([10.0], period=0.002, damping_kd=1.0, kp=1.0, kd=0.0)
    actuator.reset([0.0])
    actuator.latency = 0.01  # 5 steps
    q, dq = np.zeros(1), np.zeros(1)
    actuator.command([1.0])
    actuator.compute(q, dq)
    actuator.command([2.0])  # one step later: due one step after the first
    torques = [float(actuator.compute(q, dq)[0]) for _ in range(6)]
    # given at steps 0 and 1, due at steps 5 and 6; this loop computes steps 1..6
    assert torques == [0.0, 0.0, 0.0, 0.0, 1.0, 2.0]
    actuator.damp()  # immediate, and drops anything still in flight
    actuator.command([3.0])
    assert float(actuator.compute(q, np.ones(1))[0]) == -1.0
    assert actuator.damping_mode and actuator.pending == 1


def test_motor_strength_scales_the_applied_torque(panda):
    target = panda.default_positions + 0.02  # small error: no joint near its limit
    efforts = {}
    for strength in (1.0, 0.5):
        with make_world(panda, motor_strength=strength) as world:
            world.command(target)
            world.step()
            efforts[strength] = world.joint_state().effort
    assert np.all(np.abs(efforts[1.0]) < panda.effort_limits)
    np.testing.assert_allclose(efforts[0.5], 0.5 * efforts[1.0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("voltage", [20.0, 30.0])
def test_battery_voltage_scales_the_torque_limit(go2, voltage):
    with make_world(go2, battery_voltage=voltage) as world:
        world.command(go2.default_positions + 1.0, kp=1000.0)  # saturates every joint
        world.step()
        effort = np.abs(world.joint_state().effort)
    cap = go2.effort_limits * min(1.0, voltage / go2.battery_nominal_voltage)
    np.testing.assert_allclose(effort, cap, rtol=1e-12)


def test_mass_scale_changes_the_simulated_mass(go2):
    with make_world(go2) as world:
        nominal = world.total_mass()
        assert nominal == pytest.approx(15.018, abs=1e-6)
        world.set_condition("mass_scale", 1.3)
        assert world.total_mass() == pytest.approx(1.3 * nominal, rel=1e-9)
        inertia = pb.getDynamicsInfo(world.robot, -1, physicsClientId=world.client)[2]
        assert inertia[0] == pytest.approx(1.3 * 0.0125375, rel=1e-6)
        world.set_condition("mass_scale", 1.0)
        assert world.total_mass() == pytest.approx(nominal, rel=1e-12)


def mass_matrix_in_motion(profile, **conditions) -> np.ndarray:
    """The joint-space mass matrix as Bullet's forward dynamics sees it (calculateMassMatrix
    ignores changeDynamics): one step from rest, no gravity, a small torque on one joint at
    a time gives a column of M^-1."""
    columns = []
    for k in range(profile.num_joints):
        with make_world(profile, **conditions) as world:
            robot, client = world.robot, world.client
            pb.setGravity(0, 0, 0, physicsClientId=client)
            if not profile.fixed_base:
                position = pb.getBasePositionAndOrientation(robot, physicsClientId=client)[0]
                pb.createConstraint(
                    robot, -1, -1, -1, pb.JOINT_FIXED, [0, 0, 0], [0, 0, 0], position, physicsClientId=client
                )
            joints = world._joint_ids
            for joint, q in zip(joints, profile.default_positions):
                pb.resetJointState(robot, joint, float(q), 0.0, physicsClientId=client)
            torque = np.zeros(profile.num_joints)
            torque[k] = 0.1
            pb.setJointMotorControlArray(
                robot, joints, pb.TORQUE_CONTROL, forces=torque.tolist(), physicsClientId=client
            )
            pb.stepSimulation(physicsClientId=client)
            columns.append([s[1] / world._dt / 0.1 for s in pb.getJointStates(robot, joints, physicsClientId=client)])
    return np.linalg.inv(np.array(columns).T)


@pytest.mark.parametrize("robot", ["panda", "go2"])
def test_armature_adds_to_each_joints_own_inertia(robot):
    profile = load_profile(robot)
    armature = 0.01
    added = np.diag(mass_matrix_in_motion(profile, armature=armature) - mass_matrix_in_motion(profile))
    # Every joint gains its own armature; a joint whose descendants turn about parallel axes
    # (Go2 thigh and calf, Panda joints 1-4) also carries theirs (the documented approximation).
    assert np.all(added >= armature * (1 - 1e-3)), added
    assert added[-1] == pytest.approx(armature, rel=1e-3)  # the last joint has no descendants
    assert np.all(added <= armature * profile.num_joints)


def test_armature_slows_a_kicked_joint(panda):
    with make_world(panda) as world:
        free = coast_distance(world, 6, 0.02)
    with make_world(panda, armature=0.01) as world:
        heavy = coast_distance(world, 6, 0.02)
    assert heavy < 0.5 * free, (heavy, free)  # inertia 0.0032 -> 0.0132 kg m^2


def ground_height(world: SimWorld, x: float, y: float) -> float:
    top = 2.0
    while True:  # look through the robot if it stands in the way
        hit = pb.rayTest([x, y, top], [x, y, -2.0], physicsClientId=world.client)[0]
        if hit[0] != world.robot:
            assert hit[0] in world.ground_bodies
            return hit[3][2]
        top = hit[3][2] - 1e-4


def test_terrain_roughness_builds_a_height_field_the_go2_spawns_above(go2):
    with make_world(go2, terrain_roughness=0.04, seed=3) as world:
        grid = np.linspace(-1.0, 1.0, 9)
        heights = np.array([[ground_height(world, x, y) for x in grid] for y in grid])
        assert heights.std() > 0.01
        assert np.all(np.abs(heights) <= 0.04 + 1e-6)
        lowest_robot_point = min(
            pb.getAABB(world.robot, link, physicsClientId=world.client)[0][2]
            for link in range(-1, pb.getNumJoints(world.robot, physicsClientId=world.client))
        )
        assert lowest_robot_point > heights.max()
        world.step(500)
        position = world.base_pose()[0]
        assert position[2] - ground_height(world, position[0], position[1]) > 0.18
        world.set_condition("terrain_roughness", 0.0)
        assert world.terrain_heights is None
        assert ground_height(world, 0.3, 0.2) == pytest.approx(0.0, abs=1e-9)


def test_terrain_rebuilds_match_their_height_samples(go2):
    with make_world(go2, terrain_roughness=0.03, seed=5) as world:
        for roughness in (0.02, 0.0, 0.1, 0.05):  # shrink, flatten, grow past the first size
            world.set_condition("terrain_roughness", roughness)
            world.reset()
            heights = world.terrain_heights
            if roughness == 0.0:
                assert heights is None
                continue
            middle = (heights.shape[0] - 1) // 2
            for i, j in [(middle + 7, middle - 3), (middle - 20, middle + 11), (middle + 40, middle + 40)]:
                x, y = (i - middle) * TERRAIN_CELL, (j - middle) * TERRAIN_CELL
                assert ground_height(world, x, y) == pytest.approx(heights[j, i], abs=1e-6)
            assert np.abs(heights[1:]).max() <= roughness
            world.step(250)
            assert world.base_pose()[0][2] > 0.15


@pytest.mark.parametrize("condition", [{"joint_damping": 2.0}, {"joint_friction": 3.0}])
def test_joint_losses_reduce_a_free_joints_motion(panda, condition):
    with make_world(panda) as world:
        free = coast_distance(world, joint=0, kick=10.0)
    with make_world(panda, **condition) as world:
        lossy = coast_distance(world, joint=0, kick=10.0)
    assert free > 0.5
    assert lossy < 0.7 * free, (free, lossy)


def test_joint_friction_brings_a_joint_to_rest(panda):
    with make_world(panda, joint_friction=3.0) as world:
        coast_distance(world, joint=0, kick=10.0)
        world.step(250)
        assert abs(world.true_joint_state().velocity[0]) < 0.05


def test_sensor_noise_has_the_configured_std(go2):
    std = dict(joint_position_noise=0.01, joint_velocity_noise=0.05, gyro_noise=0.02, accelerometer_noise=0.1)
    with make_world(go2, seed=11, **std) as world:
        world.step(10)
        truth = world.true_joint_state()
        quiet = SimWorld(go2, seed=11)
        try:
            quiet.step(10)
            true_imu = quiet.imu()
        finally:
            quiet.close()
        samples = [world.joint_state() for _ in range(500)]
        imus = [world.imu() for _ in range(1000)]
    measured = {
        "joint_position_noise": np.std([s.position - truth.position for s in samples]),
        "joint_velocity_noise": np.std([s.velocity - truth.velocity for s in samples]),
        "gyro_noise": np.std([i.angular_velocity - true_imu.angular_velocity for i in imus]),
        "accelerometer_noise": np.std([i.linear_acceleration - true_imu.linear_acceleration for i in imus]),
    }
    for name, value in measured.items():
        assert value == pytest.approx(std[name], rel=0.1), name


def test_one_read_gives_the_separate_reads_bitwise(go2):
    # A training step reads the joints once and the base once: the shortcuts must give what
    # the separate calls give, noise draws included, and leave the true reading untouched.
    worlds = [make_world(go2, seed=5, joint_position_noise=0.01, joint_velocity_noise=0.05) for _ in range(2)]
    try:
        for world in worlds:
            world.command(go2.default_positions + 0.1)
            world.step(40)
        true = worlds[0].true_joint_state()
        kept = [a.copy() for a in true]
        shared, separate = worlds[0].joint_state(true), worlds[1].joint_state()
        for a, b in zip(shared, separate):
            assert np.array_equal(a, b)
        assert all(np.array_equal(a, b) for a, b in zip(true, kept))
        assert not np.array_equal(shared.position, true.position)  # the noise went on a copy
        together = worlds[0].base_pose_and_velocity()
        apart = (*worlds[0].base_pose(), *worlds[0].base_velocity())
        assert all(np.array_equal(a, b) for a, b in zip(together, apart))
    finally:
        for world in worlds:
            world.close()


# ---------------------------------------------------------------------- sensing
def test_imu_at_rest_reads_gravity_up_and_no_rotation(go2, panda):
    with make_world(panda) as world:
        world.step(100)
        imu = world.imu()
        np.testing.assert_allclose(imu.linear_acceleration, [0.0, 0.0, 9.81], atol=1e-9)
        np.testing.assert_allclose(imu.angular_velocity, 0.0, atol=1e-9)
    with make_world(go2) as world:
        world.command(go2.default_positions, kp=80.0, kd=2.0)  # stiff, so it settles quickly
        world.step(1500)
        imu = world.imu()
        up_in_body = pb.getMatrixFromQuaternion(imu.orientation)[6:9]  # world z in body axes
        np.testing.assert_allclose(imu.linear_acceleration, 9.81 * np.array(up_in_body), atol=0.05)
        assert imu.linear_acceleration[2] == pytest.approx(9.81, abs=0.05)
        np.testing.assert_allclose(imu.angular_velocity, 0.0, atol=0.01)


def test_imu_measures_a_push_as_acceleration(go2):
    with make_world(go2) as world:
        world.step(300)
        world.apply_push([0.0, 45.0, 0.0], 0.1)
        world.step(2)
        # 45 N on 15 kg, minus what the feet take: clearly positive along body y.
        assert world.imu().linear_acceleration[1] > 1.0


def test_go2_stands_in_the_default_pose(go2):
    with make_world(go2) as world:
        world.step(250)  # settle onto the profile's soft (kp 20) gains
        heights, tilts = [], []
        for _ in range(40):
            world.step(50)
            position, orientation = world.base_pose()
            heights.append(position[2])
            up = pb.getMatrixFromQuaternion(orientation)[8]
            tilts.append(np.arccos(min(1.0, up)))
        assert world.time == pytest.approx(4.5, abs=1e-9)
        assert min(heights) > 0.22
        assert max(heights) - min(heights) < 0.04
        assert max(tilts) < 0.1
        assert world.foot_contacts().all()


def test_a_suspended_go2_hangs_still_while_its_legs_swing_clear_of_the_ground(go2):
    """The gantry: every joint swung 0.2 rad at once (what topples a standing Go2) moves the
    legs, not the trunk, and the joints track their targets with only the legs' weight to hold."""
    with SimWorld(go2, suspended=True) as world:
        start = world.base_pose()[0]
        assert start[2] == pytest.approx(go2.spawn_height + SUSPENSION_CLEARANCE)
        worst = 0.0
        for k in range(1500):
            target = go2.default_positions + 0.2 * np.sin(2 * np.pi * 0.5 * k * 0.002)
            world.command(target)
            world.step()
            worst = max(worst, np.abs(world.true_joint_state().position - target).max())
            assert not world.foot_contacts().any()
        position, orientation = world.base_pose()
        np.testing.assert_allclose(position, start, atol=1e-3)
        assert np.arccos(min(1.0, pb.getMatrixFromQuaternion(orientation)[8])) < 1e-3
        np.testing.assert_allclose(world.imu().linear_acceleration, [0, 0, 9.81], atol=0.05)
        assert worst < 0.15
        world.reset(base_position=(1.0, 0.0, 1.0))  # the gantry moves with a reset
        world.step(500)
        np.testing.assert_allclose(world.base_pose()[0], (1.0, 0.0, 1.0), atol=1e-3)


def test_a_fixed_base_robot_cannot_be_suspended(panda):
    with pytest.raises(ValueError, match="has a fixed base"):
        SimWorld(panda, suspended=True)


def test_panda_holds_its_default_pose(panda):
    with make_world(panda) as world:
        world.step(1000)
        error = world.true_joint_state().position - panda.default_positions
    assert np.abs(error).max() < 0.01


def test_joints_move_no_faster_than_the_profiles_velocity_limits(panda):
    """A wrist commanded 1.5 rad away at once (12 N m on a light link) would spin it at tens of
    rad/s; the real arm's motors and controller stop at the rated speed, and so does the sim."""
    with make_world(panda) as world:
        world.step(50)
        targets = panda.default_positions.copy()
        targets[4:] += 1.5
        world.command(targets)
        top = np.zeros(panda.num_joints)
        for _ in range(100):
            world.step(1)
            top = np.maximum(top, np.abs(world.true_joint_state().velocity))
    assert np.all(top <= panda.velocity_limits * 1.001), (top, panda.velocity_limits)
    assert top[6] > 0.9 * panda.velocity_limits[6]  # it does get there: the limit binds


def test_damp_lets_the_arm_move_only_slowly(panda):
    with make_world(panda) as world:
        world.damp()
        world.step(250)
        assert np.abs(world.true_joint_state().velocity).max() < 0.05


def test_reset_restores_the_start(go2):
    with make_world(go2) as world:
        world.step(200)
        world.reset()
        assert world.time == 0.0
        np.testing.assert_allclose(world.true_joint_state().position, go2.default_positions, atol=1e-12)
        np.testing.assert_allclose(world.base_pose()[0], [0.0, 0.0, go2.spawn_height], atol=1e-9)
        assert np.all(world.base_velocity()[0] == 0.0)


# ------------------------------------------------------------------- bad input
def test_unknown_condition_name_lists_the_valid_names(go2):
    with make_world(go2) as world:
        with pytest.raises(ValueError, match=r"unknown condition 'gravity'.*ground_friction"):
            world.set_condition("gravity", 1.0)


@pytest.mark.parametrize(
    "name, value",
    [
        ("ground_friction", -0.1),
        ("mass_scale", 0.0),
        ("latency", float("nan")),
        ("battery_voltage", -3.0),
        ("joint_damping", "a lot"),
    ],
)
def test_out_of_range_condition_names_the_condition_and_range(go2, name, value):
    with pytest.raises(ValueError, match=rf"condition '{name}'.*valid range"):
        PhysicalConditions(**{name: value}).validate()
    with pytest.raises(ValueError, match=rf"condition '{name}'"):
        make_world(go2, **{name: value})
    with make_world(go2) as world:
        with pytest.raises(ValueError, match=rf"condition '{name}'"):
            world.set_condition(name, value)
        assert world.conditions == PhysicalConditions()  # nothing half-applied


def test_battery_voltage_on_a_robot_without_a_battery_is_refused(panda):
    with pytest.raises(ValueError, match="battery_nominal_voltage"):
        make_world(panda, battery_voltage=24.0)


def test_wrong_length_command_names_the_argument(go2):
    with make_world(go2) as world:
        with pytest.raises(ValueError, match=r"position: expected 12 values"):
            world.command(np.zeros(7))
        with pytest.raises(ValueError, match=r"kd: expected 12 values"):
            world.command(go2.default_positions, kd=np.ones(3))
        with pytest.raises(ValueError, match="finite"):
            world.command(np.full(12, np.nan))


def test_condition_names_are_the_contract():
    assert PhysicalConditions.names() == (
        "ground_friction",
        "mass_scale",
        "motor_strength",
        "latency",
        "terrain_roughness",
        "battery_voltage",
        "joint_friction",
        "joint_damping",
        "armature",
        "joint_position_noise",
        "joint_velocity_noise",
        "gyro_noise",
        "accelerometer_noise",
    )
