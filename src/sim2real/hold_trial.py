"""The safety supervisor's hold on a real (PyBullet) Go2 whose policy stops mid-trot.

The shipped Go2 policy walks at 0.5 m/s in SimWorld while a ``SupervisorCore`` sees every tick
(world state in, the policy's targets) and is ACTIVE. Then the policy goes silent: the
supervisor keeps its last command until the policy_stale deadline, trips (a HOLD) and its
commands alone drive the robot for a few seconds. Used by ``benchmarks/supervisor_hold.py``
(keep the last targets vs move to the stand pose, many stops) and the tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim2real.core.joint_command import JointTargets
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import tilt_angle
from sim2real.core.safety_config import SafetyConfig, load_safety_config
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs

HOLD_SECONDS = 3.0


@dataclass(frozen=True)
class HoldOutcome:
    trips: tuple[str, ...]  # the supervisor's trips in order: the policy_stale hold, then any damp
    worst_tilt: float       # rad, largest trunk tilt over the hold
    final_tilt: float       # rad, at the end of the hold
    final_height: float     # m, base height at the end of the hold


def stop_mid_trot(seed: int, walk_steps: int, config: SafetyConfig | None = None,
                  hold_seconds: float = HOLD_SECONDS, policy_path: str | Path | None = None) -> HoldOutcome:
    """Walk ``walk_steps`` policy periods from episode ``seed``, then stop the policy
    (``policy_path``: a Go2 walk policy file; default the shipped one)."""
    from sim2real.evaluate.evaluate import eval_task_config
    from sim2real.train.tasks import make_env

    profile = load_profile("go2")
    policy = load_policy(policy_path or share_dir() / "policies" / "go2_walk.onnx")
    env = make_env("go2", "walk", seed=seed, config=eval_task_config("walk", policy.metadata.task_config))
    try:
        obs, _ = env.reset(seed=seed)
        world, period = env.world, env.policy_period
        core = SupervisorCore(profile, config or load_safety_config("go2"), period, simulated=True)
        now = 0.0
        fed = SupervisorInputs()

        def sense(policy_targets=None) -> SupervisorInputs:
            """The newest of each stream, as the node keeps them: the policy's last command
            stays, and goes stale once the policy is silent for the check's deadline."""
            state, imu = world.true_joint_state(), world.imu()
            fed.joint_position, fed.joint_velocity, fed.joint_effort = state.position, state.velocity, state.effort
            fed.base_orientation, fed.joint_states_time, fed.imu_time = imu.orientation, now, now
            if policy_targets is not None:
                fed.policy_command = JointTargets.positions(policy_targets)
                fed.policy_time = fed.policy_stamp = now
            return fed

        # The robot spawns standing: the supervisor's stand-up runs on that pose, and it engages after.
        now = -core.config.stand_duration
        while now < 0.0:
            core.tick(sense(), now)
            now += period
        now = 0.0
        for step in range(walk_steps):
            action = policy.act(obs)
            sense(policy.metadata.joint_targets(action))
            if step == 0 and not core.request("engage", fed, now)[0]:
                raise RuntimeError("the supervisor refused to engage the walking policy")
            if core.tick(fed, now).mode != Mode.ACTIVE:
                raise RuntimeError(f"the supervisor left ACTIVE while walking: {core.last_trip}")
            # The env applies the policy's own targets: the supervisor would pass them unchanged
            # but for its clamps, which a walk at 0.5 m/s does not reach.
            obs, _, terminated, _, _ = env.step(action)
            if terminated:
                raise RuntimeError(f"the policy fell while walking (seed {seed}, step {step})")
            now += period
        worst, trips = 0.0, []
        for _ in range(round(hold_seconds / period)):
            decision = core.tick(sense(), now)
            trips += decision.events  # no operator acts here: every mode change is a trip
            world.command(decision.command.position)
            world.step(env.decimation)
            now += period
            position, orientation = world.base_pose()
            worst = max(worst, tilt_angle(orientation))
        return HoldOutcome(tuple(trips), worst, tilt_angle(orientation), float(position[2]))
    finally:
        env.close()
