"""Preflight: what must hold before a bridge forwards any command to a Go2.

Over a window of received LowState (each with its receipt time): the stream arrives at >= 90 %
of its rate, the tick advances, every CRC is valid, the IMU quaternion is a unit quaternion,
every joint is inside its limits (within a tolerance), the battery is above and every motor below its
threshold, and nobody else writes rt/lowcmd. Each failure is one line: the value, the limit,
the fix.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.core.unitree.low_level import LowStateReading

MIN_RATE_FRACTION = 0.9
# rad a joint may read past its limit: a Go2 lying folded rests its calves on their stops (a
# reading just past the limit); further out is a calibration fault or a profile for another robot.
JOINT_TOLERANCE = 0.05
QUATERNION_TOLERANCE = 0.01  # | |q| - 1 |

RELEASE_SPORT_MODE = (
    "the robot's sport mode still drives the motors: release it first (with the robot lying "
    "down: in the Unitree app, or with the SDK's MotionSwitcherClient.ReleaseMode()), "
    "then start again; nothing else may write rt/lowcmd"
)


SEVERAL_ROBOTS = (
    "two robots, or a robot and a simulator, on one DDS domain and interface (a Go2 is fixed "
    "at domain 0: put each robot on its own network interface, network_interface:=, or a "
    "simulator on another domain, unitree_domain:=) or switch the other off"
)


def preflight(
    received: Sequence[tuple[float, LowStateReading]],
    window: float,
    profile: RobotProfile,
    other_writers: Sequence[str] = (),
    state_writers: Sequence[str] = (),
) -> list[str]:
    """The failed checks (empty: all passed). ``received``: (receipt time in s, reading) over
    the last ``window`` s; ``other_writers``: other DDS writers on rt/lowcmd, ``state_writers``:
    the writers on rt/lowstate (discovery; more than one is a failure)."""
    unitree = profile.unitree
    assert unitree is not None  # both callers read the window with Go2LowLevel, which refuses a profile without it
    failures = []
    expected = unitree.lowstate_rate * window
    if len(received) < MIN_RATE_FRACTION * expected:
        rate = len(received) / window
        failures.append(
            f"lowstate: {rate:.0f} Hz over {window:g} s, need >= {MIN_RATE_FRACTION * unitree.lowstate_rate:.0f} "
            "Hz: check the cable, the interface (network_interface:=) and that the robot is on"
        )
    if not received:
        return failures
    readings = [r for _, r in received]
    ticks = np.array([r.tick for r in readings], dtype=np.int64)
    if len(ticks) > 1 and not np.all(np.diff(ticks) > 0):
        stuck = int(np.sum(np.diff(ticks) <= 0))
        failures.append(
            f"lowstate tick: {stuck} of {len(ticks) - 1} samples did not advance (last {ticks[-1]}): the "
            "robot's controller is frozen or replaying; power-cycle the robot"
        )
    bad_crc = sum(not r.crc_ok for r in readings)
    if bad_crc:
        failures.append(
            f"lowstate CRC: {bad_crc} of {len(readings)} samples invalid: another robot model or a "
            "corrupted link; check the profile (robot:=go2) and the cable"
        )
    latest = readings[-1]
    norm = float(np.linalg.norm(latest.orientation))
    if not abs(norm - 1.0) <= QUATERNION_TOLERANCE:
        failures.append(
            f"IMU quaternion norm {norm:.3f}, need 1 +- {QUATERNION_TOLERANCE}: the IMU is not "
            "initialised; wait a few seconds after power-on"
        )
    for name, q, lo, hi in zip(profile.joint_names, latest.position, profile.lower_limits, profile.upper_limits):
        if not lo - JOINT_TOLERANCE <= q <= hi + JOINT_TOLERANCE:
            failures.append(
                f"joint {name} at {q:.3f} rad, outside its limits [{lo:.3f}, {hi:.3f}] by more than "
                f"{JOINT_TOLERANCE} rad: check the motor's calibration and that the profile is this "
                "robot's (robot:=go2)"
            )
    if not latest.battery_voltage >= unitree.min_battery_voltage:
        failures.append(
            f"battery {latest.battery_voltage:.1f} V, need >= {unitree.min_battery_voltage:.1f} V: "
            "charge or swap the battery"
        )
    hottest = int(np.argmax(latest.motor_temperature))
    if latest.motor_temperature[hottest] > unitree.max_motor_temperature:
        failures.append(
            f"motor {profile.joint_names[hottest]} at {latest.motor_temperature[hottest]:.0f} C, "
            f"need <= {unitree.max_motor_temperature:.0f} C: let the motors cool down"
        )
    if other_writers:
        failures.append(f"rt/lowcmd has other writers ({', '.join(other_writers)}): {RELEASE_SPORT_MODE}")
    if len(state_writers) > 1:
        failures.append(
            f"rt/lowstate has {len(state_writers)} writers (participants {', '.join(state_writers)}): {SEVERAL_ROBOTS}"
        )
    return failures
