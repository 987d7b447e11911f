"""A sysid bag recorded from a simulated robot without ROS: the same streams, stamps and
metadata that ``sysid_logger`` records on a graph, produced by stepping a SimWorld directly.

Used to check the fitter against known hidden parameters (tests, the accuracy benchmark)
and to try the workflow on a laptop. Commands are given every policy period, states
read every sensing period (with the world's sensor noise), as ``sim_robot`` does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim2real.core.bags import TYPESTORE, BagWriter
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.units import NS_PER_S
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.world import SimWorld
from sim2real.sysid.dataset import COMMANDS, JOINT_STATE_TYPE, STATES
from sim2real.sysid.excitation import Excitation
from sim2real.sysid.metadata import SUSPENDED, bag_custom_data


def joint_state_message(names, stamp_ns: int, position, velocity=(), effort=()):
    types = TYPESTORE.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=int(stamp_ns // NS_PER_S), nanosec=int(stamp_ns % NS_PER_S)),
        frame_id="",
    )
    as_array = lambda values: np.asarray(values, dtype=np.float64)  # noqa: E731
    return types[JOINT_STATE_TYPE](
        header=header,
        name=list(names),
        position=as_array(position),
        velocity=as_array(velocity),
        effort=as_array(effort),
    )


def record_in_sim(
    profile: RobotProfile,
    excitation: Excitation,
    out: str | Path,
    conditions: PhysicalConditions | None = None,
    seed: int = 0,
    settle: float = 0.5,
    suspended: bool = False,
    effort: np.ndarray | None = None,
) -> Path:
    """Run ``excitation`` on a simulated robot under ``conditions``; write a sysid bag to
    ``out``. ``suspended``: a floating-base robot hangs on a stand (SimWorld's gantry).
    ``effort``: a feed-forward torque per joint sent with every command (the supervisor's stand
    feed-forward, ``core.stand_effort``, which keeps a heavy quadruped from sitting down)."""
    world = SimWorld(profile, conditions, seed=seed, suspended=suspended)
    try:
        world.reset()
        substeps = round(profile.sensing_period / profile.physics_period)
        per_command = round(profile.policy_period / profile.sensing_period)
        sensing_ns = round(profile.sensing_period * NS_PER_S)
        total = int(round((excitation.duration + 2 * settle) / profile.sensing_period))
        names = profile.joint_names
        custom = bag_custom_data(
            profile,
            excitation,
            "sim2real.sysid.sim_recording",
            {"sim_conditions": {k: v for k, v in vars(world.conditions).items()}, "seed": seed, SUSPENDED: suspended},
        )
        with BagWriter(out, custom) as bag:
            bag.add_topic(STATES, JOINT_STATE_TYPE)
            bag.add_topic(COMMANDS, JOINT_STATE_TYPE)
            stamp = 0
            for k in range(total):
                state = world.joint_state()
                bag.write(STATES, stamp, joint_state_message(names, stamp, *state))
                if k % per_command == 0:
                    q, dq = excitation.sample(stamp / NS_PER_S - settle)
                    if not (settle <= stamp / NS_PER_S <= settle + excitation.duration):
                        dq = np.zeros_like(dq)
                    tau = np.zeros(len(names)) if effort is None else np.asarray(effort, dtype=float)
                    world.command(q, dq, tau)
                    bag.write(COMMANDS, stamp, joint_state_message(names, stamp, q, dq, tau))
                world.step(substeps)
                stamp += sensing_ns
    finally:
        world.close()
    return Path(out)
