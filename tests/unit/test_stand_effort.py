"""The stand's gravity feed-forward: its static balance, the supervisor sending it, and a PyBullet stand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import SafetyConfigError, load_safety_config, parse_safety_config
from sim2real.core.stand_effort import STANDARD_GRAVITY, standing_efforts
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import make_world
from tests.unit.test_supervisor import PERIOD, Rig

GO2 = load_profile("go2")


def test_the_efforts_balance_the_whole_weight_on_the_feet():
    """Leg by leg, J^T f = g - tau gives back vertical foot forces that carry the robot's weight
    with no moment about its centre of mass (the static balance the efforts are built on)."""
    efforts = standing_efforts(GO2)
    kinematics = Kinematics(GO2)
    q = GO2.default_positions
    feet, jacobians = kinematics.foot_jacobians(q)
    gravity = kinematics.gravity_torques(q, (0.0, 0.0, -STANDARD_GRAVITY))
    mass, centre = kinematics.centre_of_mass(q)
    assert mass == pytest.approx(15.018, abs=1e-3)  # the URDF's total (config/robots/go2.yaml)
    forces = []
    for jacobian in jacobians:
        leg = np.flatnonzero(np.abs(jacobian).sum(axis=0) > 0)  # the three joints that move this foot
        assert len(leg) == 3
        force = np.linalg.solve(jacobian[:, leg].T, (gravity - efforts)[leg])
        np.testing.assert_allclose(force[:2], 0.0, atol=1e-9)  # vertical only
        forces.append(force[2])
    forces = np.array(forces)
    assert forces.sum() == pytest.approx(mass * STANDARD_GRAVITY)
    np.testing.assert_allclose(forces @ (feet[:, :2] - centre[:2]), 0.0, atol=1e-9)
    assert np.all(forces > 0.0) and np.all(np.abs(efforts) < GO2.effort_limits)


@pytest.mark.parametrize("feed_forward,worst_sag", [("none", 0.30), ("gravity", 0.12)])
def test_a_pybullet_go2_stands_near_its_stand_pose_with_the_feed_forward(feed_forward, worst_sag):
    """At kp 20 the stand without feed-forward sagged 0.4 rad at the rear calves; with it, 0.09."""
    world = make_world("pybullet", GO2, conditions=PhysicalConditions(), seed=0)
    efforts = standing_efforts(GO2) if feed_forward == "gravity" else np.zeros(GO2.num_joints)
    try:
        world.reset()
        world.command(GO2.default_positions, np.zeros(GO2.num_joints), efforts)
        world.step(round(2.0 / GO2.physics_period))
        sag = np.abs(world.joint_state().position - GO2.default_positions).max()
    finally:
        world.close()
    if feed_forward == "gravity":
        assert sag < worst_sag
    else:
        assert sag > worst_sag


def test_the_supervisor_raises_the_feed_forward_with_the_stand_and_hands_it_over_on_engage():
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)
    rig.inputs.joint_position = lying.copy()
    first = rig.tick().command
    assert np.abs(first.effort).max() < 0.01 * np.abs(standing_efforts(GO2)).max()  # lying: no weight yet
    standing = rig.tick(int(2.0 / PERIOD) + 5).command
    np.testing.assert_allclose(standing.effort, standing_efforts(GO2))
    rig.inputs.joint_position = GO2.default_positions.copy()
    rig.tick(10)
    assert rig.request("engage")[0]
    halfway = rig.tick(round(0.25 / PERIOD)).command  # half of the 0.5 s blend
    assert 0.2 < np.abs(halfway.effort).max() / np.abs(standing_efforts(GO2)).max() < 0.8
    done = rig.tick(round(0.5 / PERIOD))
    assert done.mode == Mode.ACTIVE
    np.testing.assert_allclose(done.command.effort, 0.0)  # the policy's own (none)


def test_an_arm_and_a_config_without_it_send_no_feed_forward():
    assert load_safety_config("panda").stand_effort == "none"
    config = dataclasses.replace(load_safety_config("go2"), stand_effort="none")
    core = SupervisorCore(GO2, config, PERIOD, simulated=True)
    n = GO2.num_joints
    inputs = SupervisorInputs(
        joint_position=GO2.default_positions.copy(),
        joint_velocity=np.zeros(n),
        joint_effort=np.zeros(n),
        base_orientation=np.array([0, 0, 0, 1.0]),
        joint_states_time=0.02,
        imu_time=0.02,
    )
    command = core.tick(inputs, 3.0).command
    np.testing.assert_allclose(command.effort, 0.0)


def test_an_unknown_stand_effort_names_the_choices():
    with pytest.raises(SafetyConfigError, match="stand_effort.*gravity.*none"):
        parse_safety_config({"stand_effort": "magic"})
