"""The stand's gravity feed-forward: its static balance, the supervisor sending it, and a PyBullet stand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import SafetyConfigError, load_safety_config, parse_safety_config
from sim2real.core.stand_effort import standing_efforts
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import make_world
from tests.unit.test_supervisor import PERIOD, Rig

GO2 = load_profile("go2")


def test_the_efforts_hold_the_floating_base_robot_in_balance_on_vertical_foot_forces():
    """Checked on a model the efforts are not computed with: the URDF on a free-flying base
    (trunk level at the origin). Some upward foot forces must balance gravity on every one of
    its 18 coordinates (the trunk's force and moment rows included) with the efforts applied."""
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(GO2.urdf), pin.JointModelFreeFlyer())
    data = model.createData()
    q = pin.neutral(model)
    joints = [model.joints[model.getJointId(name)] for name in GO2.joint_names]
    for joint, value in zip(joints, GO2.default_positions):
        q[joint.idx_q] = value
    applied = np.zeros(model.nv)
    for joint, effort in zip(joints, standing_efforts(GO2)):
        applied[joint.idx_v] = effort
    gravity = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    upward = np.column_stack(
        [pin.getFrameJacobian(model, data, model.getFrameId(foot), world)[2] for foot in GO2.foot_links]
    )
    forces, *_ = np.linalg.lstsq(upward, gravity - applied, rcond=None)
    np.testing.assert_allclose(upward @ forces, gravity - applied, atol=1e-6)
    assert forces.sum() == pytest.approx(pin.computeTotalMass(model) * 9.81)
    assert np.all(forces > 0.0) and np.all(np.abs(standing_efforts(GO2)) < GO2.effort_limits)


@pytest.mark.parametrize("feed_forward,worst_sag", [("none", 0.30), ("gravity", 0.12)])
def test_a_pybullet_go2_stands_near_its_stand_pose_with_the_feed_forward(feed_forward, worst_sag):
    """At kp 20 the stand without feed-forward sags 0.4 rad at the rear calves; with it, 0.09."""
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


def test_a_takeover_of_a_standing_robot_keeps_its_weight_carried():
    rig = Rig()
    rig.tick(int(2.5 / PERIOD))
    assert rig.request("takeover")[0]
    for _ in range(int(0.5 / PERIOD)):
        np.testing.assert_allclose(rig.tick().command.effort, standing_efforts(GO2))


def test_a_stand_up_restarted_from_where_a_robot_lies_starts_with_no_feed_forward():
    """A robot that did not follow its stand-up (a driver damped it) is lying: the reset's new
    stand-up starts at its measured pose with none of the weight carried, not the torques the
    old stand-up had reached."""
    rig = Rig()
    rig.tick(int(1.5 / PERIOD))  # three quarters up: most of the feed-forward is out
    assert np.abs(rig.core._last_sent.effort).max() > 0.5 * np.abs(standing_efforts(GO2)).max()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)
    rig.inputs.joint_position = lying.copy()
    accepted, message = rig.request("reset")
    assert accepted, message
    restarted = rig.tick().command  # its targets step toward the lying pose (target_step)
    assert np.abs(restarted.effort).max() < 0.01 * np.abs(standing_efforts(GO2)).max()


def test_a_takeover_during_the_stand_up_finishes_raising_the_feed_forward():
    rig = Rig()
    rig.tick(int(1.0 / PERIOD))
    assert rig.request("takeover")[0]
    done = rig.tick(int(0.5 / PERIOD)).command  # past hold_duration (0.2 s)
    np.testing.assert_allclose(done.effort, standing_efforts(GO2))


def test_a_hold_of_a_robot_that_walked_adds_no_feed_forward():
    """Stopping a trot to the stand pose, the feed-forward made more stops end badly (7 of 20 at
    0.5 m/s against 3 of 20 without it, benchmarks/supervisor_hold.py's hold to the stand)."""
    rig = Rig()
    rig.engaged()
    assert rig.request("takeover")[0]
    for _ in range(int(0.5 / PERIOD)):
        np.testing.assert_allclose(rig.tick().command.effort, 0.0)


def test_without_a_stand_feed_forward_the_policys_effort_goes_out_unchanged_from_the_engage():
    panda = load_profile("panda")
    rig = Rig(config=load_safety_config("panda"), profile=panda)
    rig.policy = panda.default_positions.copy()
    rig.policy_effort = np.full(panda.num_joints, 1.5)
    rig.tick(int(3.0 / PERIOD))
    assert rig.request("engage")[0]
    np.testing.assert_allclose(rig.tick().command.effort, 1.5)  # mid-blend: the pose blends, not the effort


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
    )
    for now in np.arange(0.02, 3.0, PERIOD):  # past the stand-up: a feed-forward would be whole by now
        inputs.joint_states_time = inputs.imu_time = now
        command = core.tick(inputs, now).command
    np.testing.assert_allclose(command.effort, 0.0)


def test_an_unknown_stand_effort_names_the_choices():
    with pytest.raises(SafetyConfigError, match="stand_effort.*gravity.*none"):
        parse_safety_config({"stand_effort": "magic"})
