"""When the Go2 bridge may command, and what it sends (sim2real.core.unitree.gate), without DDS."""
import numpy as np
import pytest

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import load_profile
from sim2real.core.unitree.frames import seal_state
from sim2real.core.unitree.gate import ARMED, DISCOVERY_S, LATCHED, RESYNC_TOLERANCE, WAITING, BridgeGate
from sim2real.core.unitree.low_level import Go2LowLevel
from sim2real.core.unitree.messages import LowState_

GO2 = load_profile("go2")
LOW = Go2LowLevel(GO2)
PERIOD = 0.002


class Robot:
    """Healthy LowState at 500 Hz into a gate, its clock with it."""

    def __init__(self):
        self.gate = BridgeGate(LOW, GO2.command_timeout, created=0.0)
        self.now, self.tick = 0.0, 1000
        self.position = GO2.default_positions.copy()

    def state(self, tick=None):
        msg = LowState_(tick=self.tick if tick is None else tick, power_v=25.2)
        msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
        for slot, q in zip(LOW.slots, self.position):
            msg.motor_state[slot].q = float(q)
            msg.motor_state[slot].temperature = 40
        return LOW.read(seal_state(msg))

    def run(self, seconds, writers=()):
        out = []
        for _ in range(round(seconds / PERIOD)):
            self.now += PERIOD
            self.tick += 2
            if round(self.now / PERIOD) % 125 == 0:  # discovery, every 0.25 s
                self.gate.writers(list(writers), self.now)
            out.append(self.gate.lowstate(self.state(), self.now))
        return out

    def armed(self):
        self.run(DISCOVERY_S + 1.5)
        assert self.gate.state == ARMED, self.gate.failures
        return self


def is_damping(frame) -> bool:
    return frame is not None and all(frame.motor_cmd[s].kp == 0.0 and frame.motor_cmd[s].kd == GO2.damping_kd
                                     for s in LOW.slots)


def test_waiting_writes_nothing_publishes_nothing_and_forwards_nothing():
    robot = Robot()
    results = robot.run(0.5)
    assert robot.gate.state == WAITING
    assert all(publish is False and frame is None for publish, frame in results)
    frame, why = robot.gate.command(JointTargets.positions(GO2.default_positions), robot.now)
    assert frame is None and "preflight has not passed" in why


def test_preflight_waits_for_discovery_then_arms_and_damps_until_the_first_command():
    robot = Robot()
    robot.run(0.9)  # lowstate fine, discovery not settled
    assert robot.gate.state == WAITING
    robot.run(1.5)
    assert robot.gate.state == ARMED
    publish, frame = robot.run(0.01)[-1]
    assert publish and is_damping(frame)


def test_a_command_is_resent_until_it_is_older_than_the_timeout_then_damping():
    robot = Robot().armed()
    frame, _ = robot.gate.command(JointTargets.positions(robot.position + 0.05), robot.now)
    assert frame is not None and not is_damping(frame)
    frames = [f for _, f in robot.run(GO2.command_timeout + 0.02)]
    assert frames[0] is frame and is_damping(frames[-1])
    assert robot.gate.counts["timeouts"] == 1


def test_after_a_timeout_only_a_command_near_the_measured_joints_resumes():
    robot = Robot().armed()
    robot.gate.command(JointTargets.positions(robot.position), robot.now)
    robot.run(GO2.command_timeout + 0.02)
    far = robot.position + RESYNC_TOLERANCE + 0.1
    frame, why = robot.gate.command(JointTargets.positions(far), robot.now)
    assert frame is None and "from the measured joints" in why
    assert is_damping(robot.run(0.01)[-1][1])
    frame, _ = robot.gate.command(JointTargets.positions(robot.position + 0.01), robot.now)
    assert frame is not None and not is_damping(frame)


def test_another_writer_after_arming_latches_for_good():
    robot = Robot().armed()
    robot.gate.command(JointTargets.positions(robot.position), robot.now)
    results = robot.run(0.5, writers=["sport"])
    assert robot.gate.state == LATCHED and "another writer on rt/lowcmd (sport)" in robot.gate.failures[0]
    assert all(not publish for publish, _ in results[-10:]) and is_damping(results[-1][1])
    robot.run(3.0)  # the writer is gone: still latched, no state for the supervisor
    assert robot.gate.state == LATCHED
    assert robot.gate.command(JointTargets.positions(robot.position), robot.now)[0] is None


def test_shutdown_latches_on_damping():
    robot = Robot().armed()
    assert is_damping(robot.gate.shutdown())
    assert robot.gate.state == LATCHED and is_damping(robot.run(0.01)[-1][1])


@pytest.mark.parametrize("tick, published", [(50_000, False), (49_990, False), (5, True)],
                         ids=["repeated", "back 10 ms", "robot restarted"])
def test_a_tick_that_goes_back_is_dropped_unless_the_robot_restarted(tick, published):
    robot = Robot().armed()
    robot.gate.lowstate(robot.state(tick=50_000), robot.now)
    publish, _ = robot.gate.lowstate(robot.state(tick=tick), robot.now)
    assert publish is published
