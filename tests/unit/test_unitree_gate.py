"""When the Go2 bridge may command, and what it writes (sim2real.core.unitree.gate), without DDS:
the gate writes every frame itself, into a list here."""

import numpy as np
import pytest

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import load_profile
from sim2real.core.unitree.frames import seal_state
from sim2real.core.unitree.gate import (
    ARMED,
    DISCOVERY_S,
    LATCHED,
    RESYNC_TOLERANCE,
    SHUTDOWN_FRAMES,
    STOPPED,
    WAITING,
    BridgeGate,
)
from sim2real.core.unitree.low_level import Go2LowLevel
from sim2real.core.unitree.messages import LowState_

GO2 = load_profile("go2")
LOW = Go2LowLevel(GO2)
PERIOD = 0.002


class Robot:
    """Healthy LowState at 500 Hz into a gate, its clock with it; what the gate wrote in ``sent``."""

    def __init__(self):
        self.sent = []
        self.gate = BridgeGate(LOW, GO2.command_timeout, created=0.0, write=self.sent.append)
        self.now, self.tick = 0.0, 1000
        self.position = GO2.default_positions.copy()

    def state(self, tick=None):
        msg = LowState_(tick=self.tick if tick is None else tick, power_v=25.2)
        msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
        for slot, q in zip(LOW.slots, self.position):
            msg.motor_state[slot].q = float(q)
            msg.motor_state[slot].temperature = 40
        return LOW.read(seal_state(msg))

    def run(self, seconds, writers=(), discovery=True, state_writers=("robot",)):
        """(published, frames written) for each LowState; discovery finds ``writers`` on rt/lowcmd
        (besides the bridge) and ``state_writers`` on rt/lowstate."""
        out = []
        for _ in range(round(seconds / PERIOD)):
            self.now += PERIOD
            self.tick += 2
            if discovery and round(self.now / PERIOD) % 125 == 0:  # every 0.25 s
                self.gate.writers(list(writers), self.now, list(state_writers))
            before = len(self.sent)
            published = self.gate.lowstate(self.state(), self.now)
            out.append((published, self.sent[before:]))
        return out

    def command(self, position):
        before = len(self.sent)
        why = self.gate.command(JointTargets.positions(position), self.now)
        return why, self.sent[before:]

    def armed(self):
        self.run(DISCOVERY_S + 1.5)
        assert self.gate.state == ARMED, self.gate.failures
        return self


def is_damping(frame) -> bool:
    cmd = frame.message()
    return all(cmd.motor_cmd[s].kp == 0.0 and cmd.motor_cmd[s].kd == GO2.damping_kd for s in LOW.slots)


def test_waiting_writes_nothing_publishes_nothing_and_forwards_nothing():
    robot = Robot()
    results = robot.run(0.5)
    assert robot.gate.state == WAITING and robot.sent == []
    assert not any(published for published, _ in results)
    why, written = robot.command(GO2.default_positions)
    assert "preflight has not passed" in why and written == []


def test_without_discovery_it_never_arms():
    robot = Robot()
    robot.run(3.0, discovery=False)  # healthy lowstate, but nobody has looked for rival writers
    assert robot.gate.state == WAITING and robot.sent == []
    assert "rt/lowcmd writers not known yet" in robot.gate.failures[-1]


def test_armed_it_damps_until_the_first_command():
    robot = Robot().armed()
    published, written = robot.run(0.01)[-1]
    assert published and len(written) == 1 and is_damping(written[0])


def test_a_command_is_resent_with_every_state_until_older_than_the_timeout_then_damping():
    robot = Robot().armed()
    why, written = robot.command(robot.position + 0.05)
    assert why == "" and len(written) == 1 and not is_damping(written[0])
    command_frame = written[0]
    frames = [w[0] for _, w in robot.run(GO2.command_timeout + 0.02)]
    on_time = round(GO2.command_timeout / PERIOD)
    assert all(f is command_frame for f in frames[: on_time - 1])
    assert all(is_damping(f) for f in frames[on_time + 1 :])
    assert robot.gate.counts["timeouts"] == 1


def test_commands_that_stop_while_lowstates_stop_too_end_in_damping_once():
    """No LowState to resend with (the robot's stream paused): the bridge's loop asks the gate
    between them, and the damping frame goes out at once, one timeout counted."""
    robot = Robot().armed()
    assert robot.command(robot.position + 0.05)[0] == ""
    before = len(robot.sent)
    assert not robot.gate.timed_out(robot.now + GO2.command_timeout / 2)
    assert robot.gate.timed_out(robot.now + GO2.command_timeout + 0.01)
    assert len(robot.sent) == before + 1 and is_damping(robot.sent[-1])
    assert not robot.gate.timed_out(robot.now + GO2.command_timeout + 0.02)  # said once
    assert robot.gate.counts["timeouts"] == 1 and not robot.gate.forwarding


def test_the_first_command_after_arming_is_forwarded_only_near_the_measured_joints():
    """A supervisor whose commands reach the bridge late (DDS discovery) has moved on through its
    stand-up meanwhile: forwarding its first command would start the robot with a jump."""
    robot = Robot().armed()
    why, written = robot.command(robot.position + RESYNC_TOLERANCE + 0.1)
    assert "from the measured joints" in why and written == []
    why, written = robot.command(robot.position + 0.05)  # built on a published state: where the robot is
    assert why == "" and not is_damping(written[0])
    why, written = robot.command(robot.position + RESYNC_TOLERANCE + 0.1)  # then it follows the supervisor
    assert why == "" and not is_damping(written[0])


def test_after_a_timeout_only_a_command_near_the_measured_joints_resumes():
    robot = Robot().armed()
    robot.command(robot.position)
    robot.run(GO2.command_timeout + 0.02)
    why, written = robot.command(robot.position + RESYNC_TOLERANCE + 0.1)
    assert "from the measured joints" in why and written == []
    nan = robot.position.copy()
    nan[3] = np.nan
    assert "from the measured joints" in robot.command(nan)[0]  # a NaN is never near
    why, written = robot.command(robot.position + 0.01)
    assert why == "" and not is_damping(written[0])


def test_another_writer_after_arming_latches_for_good():
    robot = Robot().armed()
    robot.command(robot.position)
    results = robot.run(0.5, writers=["sport"])
    assert robot.gate.state == LATCHED and "another writer on rt/lowcmd (sport)" in robot.gate.failures[0]
    assert not any(published for published, _ in results[-10:])
    assert all(is_damping(f) for _, written in results[-10:] for f in written)
    robot.run(3.0)  # the writer is gone: still latched, no state for the supervisor
    assert robot.gate.state == LATCHED
    assert robot.command(robot.position)[1] == []


def test_a_second_robot_on_lowstate_keeps_it_from_arming_and_latches_an_armed_one():
    """Two rt/lowstate writers (two robots, or a robot and a simulator, on one domain and
    interface): the bridge would command one robot from the other's states."""
    robot = Robot()
    robot.run(DISCOVERY_S + 1.5, state_writers=["robot", "double"])
    assert robot.gate.state == WAITING and robot.sent == []
    assert any("rt/lowstate has 2 writers (participants robot, double)" in line for line in robot.gate.failures)
    robot = Robot().armed()
    robot.command(robot.position)
    results = robot.run(0.5, state_writers=["robot", "double"])
    assert robot.gate.state == LATCHED and "rt/lowstate has 2 writers" in robot.gate.failures[0]
    assert all(is_damping(f) for _, written in results[-10:] for f in written)


def test_shutdown_after_arming_leaves_damping_frames_and_before_it_nothing():
    robot = Robot().armed()
    robot.command(robot.position)
    before = len(robot.sent)
    robot.gate.shutdown()
    assert robot.gate.state == LATCHED and len(robot.sent) - before > SHUTDOWN_FRAMES
    assert all(is_damping(f) for f in robot.sent[before:])
    waiting = Robot()
    waiting.run(0.5)
    waiting.gate.shutdown()
    waiting.run(0.5)
    assert waiting.gate.state == STOPPED and waiting.sent == []


@pytest.mark.parametrize(
    "tick, published, state",
    [(50_000, False, ARMED), (49_990, False, ARMED), (5, False, LATCHED)],
    ids=["repeated", "back 10 ms", "back far: restarted or a second source"],
)
def test_a_tick_that_goes_back_is_dropped_and_far_back_latches(tick, published, state):
    robot = Robot().armed()
    robot.gate.lowstate(robot.state(tick=50_000), robot.now)
    assert robot.gate.lowstate(robot.state(tick=tick), robot.now) is published
    assert robot.gate.state == state


def test_before_arming_a_robot_that_restarted_is_followed():
    robot = Robot()
    robot.gate.lowstate(robot.state(tick=50_000), 0.0)
    robot.tick = 0
    robot.run(DISCOVERY_S + 1.5)
    assert robot.gate.state == ARMED
