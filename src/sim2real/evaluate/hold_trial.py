"""The safety supervisor's stop of a real (PyBullet) Go2 mid-trot.

The shipped Go2 policy walks (0.5 m/s ahead, or any command of its trained range) in SimWorld
while a ``SupervisorCore`` sees every tick (world state in, the policy's targets) and is ACTIVE.
Then it is stopped, one of three ways (``stop``):

- ``silent``: the policy goes silent; the supervisor keeps its last command until the
  policy_stale deadline and trips (with its response: a hold, or the Go2's category-1 stop);
- ``damp``: an operator's damp (or a damp trip): category 1, DAMPING;
- ``estop``: an operator's e-stop: the same stop, latched.

Then its commands alone drive the robot for a few seconds. Used by
``benchmarks/supervisor_hold.py`` and the tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from sim2real.core.joint_command import JointTargets
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import tilt_angle
from sim2real.core.safety_config import Response, SafetyConfig, load_safety_config
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs

HOLD_SECONDS = 3.0


STOPS = ("silent", "damp", "estop")


@dataclass(frozen=True)
class HoldOutcome:
    trips: tuple[str, ...]  # the supervisor's mode changes in order (an operator's damp or e-stop, trips)
    worst_tilt: float  # rad, largest trunk tilt over the hold
    final_tilt: float  # rad, at the end of the hold
    final_height: float  # m, base height at the end of the hold
    impact_speed: float = 0.0  # m/s, fastest downward speed of the trunk's centre while under 0.15 m
    stop: str = "silent"

    @property
    def held(self) -> bool:
        """The stop began as a hold (TAKEOVER), not as a category-1 stop (DAMPING, ESTOP)."""
        return bool(self.trips) and self.trips[0].startswith("ACTIVE -> TAKEOVER")

    def bad(self, tilt: float = 0.5, height: float = 0.15, impact: float = 0.5) -> bool:
        """A stop that *ends* badly: a hold with the trunk tilted over ``tilt`` rad or under
        ``height`` m (a hold the supervisor went on to damp ends lying: bad too); a damp or
        e-stop, which ends lying by design, tilted over ``tilt`` rad or having reached the ground
        faster than ``impact`` m/s. ``worst_tilt`` (during the stop) is reported beside it, not
        counted."""
        if self.held:
            return self.final_tilt > tilt or self.final_height < height
        return self.final_tilt > tilt or self.impact_speed > impact


def silent_policy_held(config: SafetyConfig, **changes) -> SafetyConfig:
    """``config`` with a silent policy held (policy_stale: hold) instead of its own response,
    and ``changes`` (e.g. hold_pose) applied: the holds a change is compared against."""
    checks = {
        **config.checks,
        "policy_stale": dataclasses.replace(config.checks["policy_stale"], response=Response.HOLD),
    }
    return dataclasses.replace(config, checks=checks, **changes)


class _FedSupervisor:
    """The supervisor fed as the node feeds it: the newest of each stream; the policy's last
    command stays, and goes stale once the policy is silent for the check's deadline."""

    def __init__(self, core: SupervisorCore, world):
        self.core, self.world = core, world
        self.inputs = SupervisorInputs()
        self.now = 0.0

    def sense(self, policy_targets=None) -> SupervisorInputs:
        fed, now = self.inputs, self.now
        state, imu = self.world.true_joint_state(), self.world.imu()
        fed.joint_position, fed.joint_velocity, fed.joint_effort = state.position, state.velocity, state.effort
        fed.base_orientation, fed.joint_states_time, fed.imu_time = imu.orientation, now, now
        if policy_targets is not None:
            fed.policy_command = JointTargets.positions(policy_targets)
            fed.policy_time = fed.policy_stamp = now
        return fed


def _walk(env, policy, fed: _FedSupervisor, obs, walk_steps: int, seed: int) -> None:
    """Engage the policy and walk ``walk_steps`` periods; an error if it trips or falls."""
    core = fed.core
    for step in range(walk_steps):
        action = policy.act(obs)
        fed.sense(policy.metadata.joint_targets(action))
        if step == 0 and not core.request("engage", fed.inputs, fed.now)[0]:
            raise RuntimeError("the supervisor refused to engage the walking policy")
        if core.tick(fed.inputs, fed.now).mode != Mode.ACTIVE:
            raise RuntimeError(f"the supervisor left ACTIVE while walking: {core.last_trip}")
        # The env applies the policy's own targets: the supervisor would pass them unchanged
        # but for its clamps, which a walk at 0.5 m/s does not reach.
        obs, _, terminated, _, _ = env.step(action)
        if terminated:
            raise RuntimeError(f"the policy fell while walking (seed {seed}, step {step})")
        fed.now += env.policy_period


def _hold(env, fed: _FedSupervisor, stop: str, hold_seconds: float) -> HoldOutcome:
    """Stop (``stop``) and let the supervisor command the robot for ``hold_seconds``."""
    core, world, period = fed.core, fed.world, env.policy_period
    worst, trips, impact = 0.0, [], 0.0
    if stop != "silent":
        core.request(stop, fed.sense(), fed.now)
        trips += core.events
    for _ in range(round(hold_seconds / period)):
        decision = core.tick(fed.sense(), fed.now)
        trips += decision.events
        command_now = decision.command
        world.command(command_now.position, command_now.velocity, command_now.effort)
        for _ in range(env.decimation):
            world.step(1)
            position, orientation, linear, _ = world.base_pose_and_velocity()
            if position[2] < 0.15:
                impact = max(impact, -float(linear[2]))
        fed.now += period
        worst = max(worst, tilt_angle(orientation))
    return HoldOutcome(tuple(trips), worst, tilt_angle(orientation), float(position[2]), impact, stop)


def stop_mid_trot(
    seed: int,
    walk_steps: int,
    config: SafetyConfig | None = None,
    hold_seconds: float = HOLD_SECONDS,
    policy_path: str | Path | None = None,
    command: tuple[float, float, float] = (0.5, 0.0, 0.0),
    stop: str = "silent",
) -> HoldOutcome:
    """Walk ``walk_steps`` policy periods from episode ``seed`` at ``command`` (vx, vy, yaw
    rate), then stop (``stop``, one of STOPS). ``policy_path``: a Go2 walk policy file; default
    the shipped one."""
    if stop not in STOPS:
        raise ValueError(f"stop {stop!r} is not one of {STOPS}")
    from sim2real.evaluate.evaluate import eval_task_config
    from sim2real.train.tasks import make_env

    profile = load_profile("go2")
    policy = load_policy(policy_path or share_dir() / "policies" / "go2_walk.onnx")
    env = make_env("go2", "walk", seed=seed, config=eval_task_config("walk", policy.metadata.task_config))
    env.set_fixed_command(list(command))
    try:
        obs, _ = env.reset(seed=seed)
        core = SupervisorCore(profile, config or load_safety_config("go2"), env.policy_period, simulated=True)
        fed = _FedSupervisor(core, env.world)
        # The robot spawns standing: the supervisor's stand-up runs on that pose, and it engages after.
        fed.now = -core.config.stand_duration
        while fed.now < 0.0:
            core.tick(fed.sense(), fed.now)
            fed.now += env.policy_period
        fed.now = 0.0
        _walk(env, policy, fed, obs, walk_steps, seed)
        return _hold(env, fed, stop, hold_seconds)
    finally:
        env.close()
