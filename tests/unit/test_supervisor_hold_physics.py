"""The supervisor's hold on a real (PyBullet) Go2: stopped mid-trot, it must not topple.

The shipped Go2 policy walks at 0.5 m/s in SimWorld; the supervisor sees every tick (world
state in, the policy's targets) and is ACTIVE. The policy then goes silent mid-stride, the
supervisor trips on policy_stale (a HOLD) and its commands drive the robot for 3 s.
"""
import numpy as np
import pytest

from sim2real.core.joint_command import JointTargets
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import tilt_angle
from sim2real.core.safety_config import load_safety_config
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs
from sim2real.evaluate.evaluate import eval_task_config
from sim2real.train.tasks import make_env

GO2 = load_profile("go2")
POLICY = load_policy(share_dir() / "policies" / "go2_walk.onnx")
HOLD_SECONDS = 3.0


def stop_mid_trot(seed: int, walk_steps: int) -> tuple[str, float, float]:
    """(the supervisor's last trip, largest tilt rad, lowest base height m) over the hold."""
    env = make_env("go2", "walk", seed=seed, config=eval_task_config("walk", POLICY.metadata.task_config))
    try:
        obs, _ = env.reset(seed=seed)
        world, period = env.world, env.policy_period
        core = SupervisorCore(GO2, load_safety_config("go2"), period)
        now, n = 0.0, GO2.num_joints

        def inputs(policy_targets=None) -> SupervisorInputs:
            state, imu = world.true_joint_state(), world.imu()
            fed = SupervisorInputs(joint_position=state.position, joint_velocity=state.velocity,
                                   joint_effort=state.effort, joint_states_time=now,
                                   base_orientation=imu.orientation, imu_time=now)
            if policy_targets is not None:
                fed.policy_command = JointTargets(policy_targets, np.zeros(n), np.zeros(n))
                fed.policy_time = fed.policy_stamp = now
            return fed

        for step in range(walk_steps):
            action = POLICY.act(obs)
            fed = inputs(POLICY.metadata.joint_targets(action))
            if step == 0:
                assert core.request("engage", fed, now)[0]
            assert core.tick(fed, now).mode == Mode.ACTIVE
            obs, _, terminated, _, _ = env.step(action)
            assert not terminated, "the policy fell while walking: not the case under test"
            now += period
        # The policy goes silent: from here the supervisor's commands are all the robot gets.
        worst_tilt, lowest = 0.0, np.inf
        for _ in range(round(HOLD_SECONDS / period)):
            decision = core.tick(inputs(), now)
            world.command(decision.command.position)
            world.step(env.decimation)
            now += period
            position, orientation = world.base_pose()
            worst_tilt, lowest = max(worst_tilt, tilt_angle(orientation)), min(lowest, float(position[2]))
        assert core.mode == Mode.TAKEOVER
        return core.last_trip, worst_tilt, lowest
    finally:
        env.close()


@pytest.mark.parametrize("seed, walk_steps", [(2, 114), (3, 121), (4, 128)])
def test_a_go2_stopped_mid_trot_stands_instead_of_toppling(seed, walk_steps):
    # These stops toppled the robot when the hold kept the mid-stride targets (hold_pose: last).
    trip, worst_tilt, lowest = stop_mid_trot(seed, walk_steps)
    assert "policy_stale" in trip
    assert worst_tilt < 0.5, f"the trunk tilted {worst_tilt:.2f} rad during the hold"
    assert lowest > 0.15, f"the base came down to {lowest:.2f} m during the hold"
