"""safety_supervisor: the only publisher of /joint_commands.

Thin adapter around :class:`sim2real.core.supervisor.SupervisorCore`: it keeps the newest
message of each input stream with its arrival time, ticks the core once per command
period and publishes the command it returns on ``/joint_commands`` and the mode, every
check and the last trip reason on ``/safety/status``.

When it ticks: in real time, when the first policy command of a period arrives (by the
command's stamp, the state it answers), so the command reaches the robot at once and not
at the next tick of a timer out of phase with the policy (up to a period later). A
steady-clock timer, restarted at each policy tick, ticks every period whenever no policy
command ticked in the last ``POLICY_TICK_SLACK`` periods (no policy, a stalled or dead one):
the checks never wait for a policy more than two periods. A stop (``~/estop``, ``~/damp``, or
their joystick button newly pressed) that changes the mode ticks at once, so it reaches the
robot within the time to publish, not up to a period later. Policy ticks average one per
period (a token bucket), and the core's limits on target changes refill over time (target_step
a budget per period, target_rate over the time since the last command), so a late command and
the next one on time, ticking milliseconds apart, together move the targets no further than
one tick a period. In lockstep the sim's states drive the ticks, each waiting for the policy's
answer to its state.

Inputs: /joint_states, /imu/data, /policy/joint_commands, /teleop/joint_commands, /joy,
/diagnostics (a state estimator reporting divergence). Services (std_srvs/Trigger):
~/engage ~/takeover ~/damp ~/estop ~/reset.

In real time /joint_states and /imu/data are polled at each tick (:mod:`sim2real.nodes.polled`):
the supervisor acts once per command period, and a callback per 500 Hz sensor message cost
it over half a core on a 2-core robot computer. Freshness, of the sensors and of the policy's
commands, is judged by when DDS received the newest message, so a supervisor that is itself
starved for a moment does not mistake its own stall for a silent sensor or policy; on the
steady clock (:mod:`sim2real.core.steady_time`), so a system clock stepped while it runs is no
silence and hides none.

    ros2 run sim2real safety_supervisor --ros-args -p robot:=go2
    ros2 service call /safety_supervisor/engage std_srvs/srv/Trigger
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import NoReturn

import numpy as np
import rclpy.clock
import rclpy.duration
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Imu, JointState, Joy
from std_srvs.srv import Trigger

from sim2real.core import steady_time
from sim2real.core.dds_security import security_state
from sim2real.core.joint_command import CommandRefused, JointCommandMapper, JointTargets
from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.period_stats import GapFreeStream
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.steady_time import SteadyLine, SteadyReads
from sim2real.core.supervisor import (
    OPERATOR_ACTIONS,
    TELEOP_FRESH_S,
    Mode,
    SupervisorCore,
    SupervisorInputs,
)
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.imu_reading import imu_reading
from sim2real.nodes.params import declare, refuse_clock_change
from sim2real.nodes.polled import NEWEST_ONLY, Inputs
from sim2real.nodes.sole_publisher import SolePublisherCheck

# Polled /imu/data: the newest samples of a tick's period, not the newest alone (see _on_imu).
IMU_POLLED = QoSProfile(
    history=NEWEST_ONLY.history,
    depth=10,
    reliability=NEWEST_ONLY.reliability,
    durability=NEWEST_ONLY.durability,
)
LEVELS = {
    Mode.STANDBY: DiagnosticStatus.OK,
    Mode.ACTIVE: DiagnosticStatus.OK,
    Mode.TAKEOVER: DiagnosticStatus.WARN,
    Mode.DAMPING: DiagnosticStatus.ERROR,
    Mode.ESTOP: DiagnosticStatus.ERROR,
}
WARN_THROTTLE_S = 2.0
STOPPED = (Mode.DAMPING, Mode.ESTOP)  # a request that enters one of these ticks at once (real time)
STOP_BUTTONS = {"damp": STOPPED, "estop": (Mode.ESTOP,)}  # button: the modes it changes nothing in
LOCKSTEP_POLICY_WAIT_S = 2.0  # wall seconds to wait for the policy's command of a lockstep tick
# Real time: the timer stays quiet for this many periods after a tick a policy command started
# (the next command is due one period later; the slack absorbs its jitter).
POLICY_TICK_SLACK = 1.5
# Real time: policy ticks in a row faster than one a period (see _take_tick_token): a late
# command and the next one on time.
TICK_BURST = 2.0
# engage_on_start waits for this long a stream of policy commands without a gap over
# max(STREAM_GAP_S, STREAM_GAP_PERIODS command periods); the gaps are seen through this node's
# own ticks, so a supervisor starved of the CPU delays the engage as well.
ENGAGE_AFTER_STEADY_S = 1.0
STREAM_GAP_S = 0.05
# Readers of /joint_commands among this project's nodes: none of them drives a robot.
PROJECT_READERS = frozenset({"policy_runtime", "failure_collector", "sysid_logger", "state_estimator", "demo_script"})
WAITING_WARN_S = 5.0  # s: how often a stand-up still waiting for the driver says so
STREAM_GAP_PERIODS = 2.5


class SafetySupervisorNode(Node):
    # Whether the executor that spins this node hands a subscription callback the message's info
    # (DDS's receive time). rclpy's SingleThreadedExecutor does; its EventsExecutor (ros-rclpy
    # 9.1) raises "SystemError: null argument to internal routine" at the first such callback, so
    # a node spun by it (the composed control chain) times a policy command when its callback runs.
    RECEIVES_MESSAGE_INFO = True

    def __init__(self, **kwargs):
        super().__init__("safety_supervisor", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        config_name = declare(
            self, "safety_config", "", "Safety config name under config/safety/ or a path; '' = the robot's name"
        )
        autostart = declare(
            self,
            "engage_on_start",
            False,
            "Engage once the robot stands and the policy has streamed for 1 s without a gap; on "
            "a simulated robot again after each reset (sim and demos; a real robot waits for an "
            "operator, and a reset there never leads to motion by itself)",
        )
        simulated = declare(
            self,
            "simulated",
            False,
            "The robot is a simulation: hardware_only checks (the deadman) are skipped and a "
            "safety config weaker than hardware needs is accepted",
        )
        self._driver = declare(
            self,
            "driver",
            "",
            "Name of the node that drives the robot (sim_robot, unitree_bridge, ...): the stand-up "
            "waits where the robot lies until it reads /joint_commands; '' = until anything does",
        )
        suspended = declare(
            self,
            "suspended",
            False,
            "The robot hangs with its feet in the air (a simulated gantry): its stand sends no "
            "feed-forward effort whatever stand_effort says (nothing to push against)",
        )
        self.profile = load_profile(robot)
        self.config = load_safety_config(config_name or self.profile.name)
        if suspended:
            self.config = dataclasses.replace(self.config, stand_effort="none")
        self.period = self.config.command_period or self.profile.policy_period
        self.core = SupervisorCore(self.profile, self.config, self.period, simulated=simulated)
        for weakening in self.core.weakenings:
            self.get_logger().warning(f"{self.config.source}: {weakening} (allow_weakened: true)")
        # On a robot, say at start whether the DDS network can command it (docs/security.md).
        self.dds_security = security_state(
            os.environ, os.environ.get("ROS_SECURITY_ENCLAVE_OVERRIDE") or "/sim2real/safety_supervisor"
        )
        self.add_on_set_parameters_callback(refuse_clock_change)
        if not simulated:
            log = self.get_logger().info if not self.dds_security.problems else self.get_logger().warning
            log(self.dds_security.describe())
        self.inputs = SupervisorInputs()
        self.refused_messages = 0
        self._estimator_diverged = False
        self._policy_reads_estimate = True
        self.engage_on_start = autostart
        self._state_order = JointStateOrder(self.profile.joint_names, self.profile.name)
        self._policy = JointCommandMapper(self.profile.joint_names, self.profile.default_positions)
        self._teleop = JointCommandMapper(self.profile.joint_names, self.profile.default_positions)
        self._next_tick_ns = 0
        self._period_ns = round(self.period * 1e9)
        self._latest_state_ns = 0
        self._last_command: JointState | None = None  # lockstep: the answer a re-announced state gets again
        self._answered_ns = -1  # lockstep: the stamp of the newest state a command answered
        self.sim_time = self.get_parameter("use_sim_time").value
        # Real time: the supervisor's time line is the steady clock (a system clock stepped while it
        # runs, NTP at boot, must not read as a silent sensor or hide a real one); receipts and
        # stamps, on the system clock, come onto it by their age when they are read.
        self._line = SteadyLine()
        self._sensor_reads = SteadyReads(self._line)  # one read per poll
        self._policy_reads = SteadyReads(self._line)  # one per callback: the command QoS keeps one message

        self._command_pub = self.create_publisher(JointState, "/joint_commands", qos.COMMAND)
        self._driver_matched = False
        self._waiting_since = time.monotonic()
        SolePublisherCheck(
            self,
            self._command_pub,
            "only the safety supervisor may command the robot",
            on_check=self._on_command_writers,
        )
        self._status_pub = self.create_publisher(DiagnosticArray, "/safety/status", 10)
        # Lockstep: the sim's states drive the ticks, so each one is handled as it comes.
        # Real time: the sensors' newest, polled at the tick; each policy command as it comes, and
        # the first of each policy period ticks at once (a timer tick would hold it up to a period).
        self._sensor_subs = Inputs(self, polled=not self.sim_time, suffix="sensors")
        self._sensor_subs.subscribe(JointState, "/joint_states", self._on_joint_states, qos.SENSOR_SUBSCRIBE)
        # The IMU's last period (raw bytes: cheap to keep): a malformed newest sample is refused
        # and the newest good one before it still counts (polled.Inputs.take_newest_each).
        self._sensor_subs.subscribe(Imu, "/imu/data", self._on_imu, qos.SENSOR_SUBSCRIBE, IMU_POLLED, raw=True)
        self.create_subscription(
            JointState,
            "/policy/joint_commands",
            self._on_policy
            if self.sim_time
            else self._on_policy_in_real_time
            if self.RECEIVES_MESSAGE_INFO
            else self._on_policy_now,
            qos.COMMAND,
        )
        self._last_tick_monotonic = -math.inf  # real time: when the newest tick ran
        self._last_tick_by_policy = False  # real time: whether a policy command started it
        self._next_policy_period_ns = 0  # real time: a policy command stamped from here on starts a new period
        self._tick_tokens, self._tokens_at = TICK_BURST, time.monotonic()  # real time: see _take_tick_token
        self._timer = None
        self.create_subscription(JointState, "/teleop/joint_commands", self._on_teleop, qos.COMMAND)
        self.create_subscription(Joy, "/joy", self._on_joy, qos.SENSOR_SUBSCRIBE)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        for action in OPERATOR_ACTIONS:
            self.create_service(Trigger, f"~/{action}", self._service(action))
        if not self.sim_time:
            # Real time: a timer ticks whenever the policy does not (see _realtime_tick). In lockstep
            # the sim's states (and the policy's answers) drive the ticks: a sim-time timer would
            # tick without waiting for the policy.
            # On the steady clock: a system clock stepped back (NTP) must not stop the ticks.
            self._timer = self.create_timer(
                self.period, self._realtime_tick, clock=rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME)
            )
        self._awaiting_policy_since = None  # lockstep: wall time since this tick's state arrived
        self._policy_alive = False  # lockstep: a policy answers ticks, so ticks wait for it
        self._policy_stream = GapFreeStream(max(STREAM_GAP_S, STREAM_GAP_PERIODS * self.period))
        self._policy_stamp_ns = -1  # stamp of the newest policy command
        if self.sim_time:
            self._wall_timer = self.create_timer(
                0.05, self._lockstep_watchdog, clock=rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME)
            )
        self.get_logger().info(
            f"{self.profile.name}: supervising at {1 / self.period:.0f} Hz with {self.config.source}; mode STANDBY"
        )

    # -- inputs ------------------------------------------------------------------------------
    def _now(self) -> float:
        if not self.sim_time:
            return self._line.now_ns() * 1e-9
        # In lockstep the clock message may trail the state it announces: never tick behind the state.
        return max(self.get_clock().now().nanoseconds, self._latest_state_ns) * 1e-9

    @staticmethod
    def _received(reads: SteadyReads, received: float) -> float:
        """Real time: a DDS receipt (system clock, s) on the supervisor's time line."""
        return reads.receipt_ns(round(received * 1e9)) * 1e-9

    def _on_joint_states(self, msg: JointState, received: float | None = None) -> None:
        try:
            index = self._state_order.index_of(msg.name, msg.position, msg.velocity, msg.effort)
        except ValueError as exc:  # another publisher's joints, short arrays: read wrongly or raised in the tick
            self._refuse(f"ignoring {exc}")
            return
        self.inputs.joint_position = np.asarray(msg.position)[index]
        self.inputs.joint_velocity = np.asarray(msg.velocity)[index] if len(msg.velocity) else None
        self.inputs.joint_effort = np.asarray(msg.effort)[index] if len(msg.effort) else None
        self._latest_state_ns = stamps.to_ns(msg.header.stamp)
        self.inputs.joint_states_time = (
            self._now() if received is None else self._received(self._sensor_reads, received)
        )
        if self.sim_time:
            if self._latest_state_ns < self._answered_ns:
                # Sim time went back (the sim restarted): tick on the new time line, afresh.
                self.get_logger().warning(
                    "/joint_states stamps jumped back (sim restarted?): ticking on the new time line"
                )
                self._next_tick_ns, self._answered_ns, self._last_command = 0, -1, None
                # The old time line's policy answer is no answer to the new one's states (one on the
                # new time line may already be here: it stays).
                if self._policy_stamp_ns > self._latest_state_ns:
                    self._policy_stamp_ns, self._awaiting_policy_since = -1, None
            elif self._last_command is not None and self._latest_state_ns == self._answered_ns:
                # The sim re-announces a state only when no answer to it arrived: an answer
                # published before DDS matched the sim's subscription is lost (reliable QoS
                # keeps nothing for a reader it does not know yet). Answer again, or both wait
                # for each other forever.
                self._command_pub.publish(self._last_command)
                return
            # Lockstep: the sim waits for us, so its states drive the ticks. While a policy is
            # alive, the tick also waits for the policy's answer to this state: otherwise the
            # sim would run ahead of the policy and every command would carry stale actions.
            if not self._policy_alive:
                self._maybe_tick()
            elif self._latest_state_ns >= self._next_tick_ns:
                if self._policy_stamp_ns >= self._next_tick_ns:
                    # The policy's answer to this state arrived before the state did (two topics,
                    # no order between them): tick now, or the sim waits for an answer already given.
                    self._awaiting_policy_since = None
                    self._maybe_tick()
                elif self._awaiting_policy_since is None:
                    self._awaiting_policy_since = time.monotonic()

    def _on_imu(self, msg: Imu | bytes, received: float | None = None) -> bool:
        """False if refused (the previous sample stays, and goes stale)."""
        try:
            self.inputs.base_orientation = np.array(imu_reading(msg).orientation)
        except ValueError as exc:
            self._refuse(f"ignoring {exc}")
            return False
        self.inputs.imu_time = self._now() if received is None else self._received(self._sensor_reads, received)
        return True

    def _on_policy(self, msg: JointState, received: float | None = None) -> bool:
        """Take a policy command (False: refused as malformed; a NaN is taken, as a fault).
        Real time: ``received``, DDS's receipt (system clock, s)."""
        try:
            command = self._policy.apply(msg.name, msg.position, msg.velocity, msg.effort).copy()
        except CommandRefused as exc:
            if "non-finite" not in str(exc):
                self._refuse(f"ignoring /policy/joint_commands: {exc}")
                return False
            # A NaN from the policy is a fault the supervisor must see, not a message to drop.
            command = self._policy.targets.copy()
            command.position = np.full(self.profile.num_joints, np.nan)
        self.inputs.policy_command = command
        self.inputs.policy_time = self._now() if received is None else self._received(self._policy_reads, received)
        self._policy_stream.arrived(self.inputs.policy_time)
        self._policy_stamp_ns = stamps.to_ns(msg.header.stamp)
        # Its data's age (tick_overrun) is the receipt's time minus the stamp's, on one time line.
        self.inputs.policy_stamp = (
            self._policy_stamp_ns * 1e-9 if self.sim_time else self._line.stamp_ns(self._policy_stamp_ns) * 1e-9
        )
        self._policy_alive = True
        if self.sim_time and self._policy_stamp_ns >= self._next_tick_ns:
            self._awaiting_policy_since = None
            self._maybe_tick()
        # Auto-engage only once the robot stands: engaging mid stand-up (or while a quadruped
        # still settles onto its feet) hands the policy a state it never trained on.
        # ... and once the policy has streamed without a gap for a while: a runtime still warming
        # up (first inferences, its neighbours' start-up on a shared CPU) stalled for 0.11 s right
        # after an engage on its first command, and the supervisor held the robot for the run.
        # Simulated, it engages again after a trip once an operator has reset and the robot stands;
        # on hardware only once: there a reset never leads to motion by itself (ISO 13850).
        if (
            self.engage_on_start
            and self.core.stood_up(self._now())
            and self._policy_stream.steady_for() >= ENGAGE_AFTER_STEADY_S
        ):
            accepted, message = self.core.request("engage", self.inputs, self._now())
            if accepted:
                self.engage_on_start = self.core.simulated
                self.get_logger().info("engaged on start (engage_on_start)")
            else:
                self.get_logger().warning(f"engage_on_start: {message}", throttle_duration_sec=WARN_THROTTLE_S)
        return True

    def _on_teleop(self, msg: JointState) -> None:
        now = self._now()
        session_start = self.inputs.teleop_time is None or now - self.inputs.teleop_time > TELEOP_FRESH_S
        if session_start and self._last_command is not None:
            # Joints a teleop command does not name keep their targets: at the start of a session
            # those are what the robot holds now, not the stand pose or an old session's targets.
            held = np.asarray(self._last_command.position, dtype=float)
            self._teleop.targets = JointTargets.positions(held)
        try:
            self.inputs.teleop_command = self._teleop.apply(msg.name, msg.position, msg.velocity, msg.effort).copy()
            self.inputs.teleop_time = now
        except CommandRefused as exc:
            self._refuse(f"ignoring /teleop/joint_commands: {exc}")

    def _refuse(self, why: str) -> None:
        """A malformed message dropped (the previous one stays and ages): counted on /safety/status."""
        self.refused_messages += 1
        self.get_logger().warning(
            f"{why} ({self.refused_messages} messages refused so far)", throttle_duration_sec=WARN_THROTTLE_S
        )

    def _start_teleop_session_on_takeover(self, before: Mode, held: np.ndarray) -> None:
        # A takeover starts a teleop session from what is held now: joints a teleop command does
        # not name stay there (not at targets a teleop stream sent while the policy ran).
        if self.core.mode == Mode.TAKEOVER and before != Mode.TAKEOVER:
            self._teleop.targets = JointTargets.positions(held)

    def _on_command_writers(self, others: tuple[str, ...]) -> None:
        self.inputs.other_command_writers = others  # the sole_writer check trips on them

    def _on_joy(self, msg: Joy) -> None:
        self.inputs.joy_buttons = list(msg.buttons)
        self.inputs.joy_time = self._now()
        pressed = self.core.joystick(self.inputs.joy_buttons)  # acted on at the next tick, per message
        if self.sim_time:
            return  # lockstep: the sim's next state ticks, within one of its periods
        if any(action in pressed and self.core.mode not in modes for action, modes in STOP_BUTTONS.items()):
            # The stop goes out now, not at the next tick (a button that chatters ticks no more).
            self._tick_in_real_time(by_policy=False)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        # A diverged estimate endangers only a policy that reads it: the runtime says whether its
        # policy does (observes_state_estimate). Without that word (another runtime, or none
        # heard yet) the supervisor assumes it does.
        for status in msg.status:
            if status.name.startswith("state_estimator") and "diverg" in status.message.lower():
                self._estimator_diverged = status.level >= DiagnosticStatus.ERROR
            elif status.name.startswith("policy_runtime"):
                for kv in status.values:
                    if kv.key == "observes_state_estimate":
                        self._policy_reads_estimate = kv.value != "false"
        self.inputs.estimator_diverged = self._estimator_diverged and self._policy_reads_estimate

    def _service(self, action: str):
        def handle(request, response):
            before = self.core.mode
            response.success, response.message = self.core.request(action, self.inputs, self._now())
            if self._last_command is not None:
                self._start_teleop_session_on_takeover(before, np.asarray(self._last_command.position, dtype=float))
            self.get_logger().info(f"~/{action}: {before.value} -> {self.core.mode.value}: {response.message}")
            if self.core.mode in STOPPED and self.core.mode != before and not self.sim_time:
                self._tick_in_real_time(by_policy=False)  # the stop goes out now, not at the next tick
            return response

        return handle

    def _lockstep_watchdog(self) -> None:
        """Lockstep: a policy that does not answer within the wall-clock wait counts as stale."""
        since = self._awaiting_policy_since
        if since is None or time.monotonic() - since < LOCKSTEP_POLICY_WAIT_S:
            return
        self._awaiting_policy_since = None
        self._policy_alive = False  # stop waiting for it until it speaks again
        self.inputs.policy_missed = True
        self._maybe_tick()
        self.inputs.policy_missed = False

    # -- the tick ------------------------------------------------------------------------------
    def _poll_inputs(self) -> None:
        """Real time: take the newest of each polled input (none in lockstep)."""
        self._sensor_reads.begin()
        self._sensor_subs.take_newest_each()

    def _on_policy_in_real_time(self, msg: JointState, info) -> None:
        """Real time: a policy command ticks at once when it is the first of its policy period
        (by its stamp, the state it answers): it reaches the robot without waiting for the timer,
        and the timer's phase follows it. Its arrival is when DDS received it (as for the polled
        sensors), so a supervisor that waited for the CPU does not count its wait as the policy's."""
        self._policy_reads.begin()
        received = info.get("received_timestamp") or steady_time.system_ns()
        self._poll_inputs()  # engage_on_start in _on_policy judges the newest sensing
        if not self._on_policy(msg, received * 1e-9):
            return
        if not stamps.tick_due(self._policy_stamp_ns, self._next_policy_period_ns, self._period_ns):
            return  # a second command of the period: the next tick takes the newest
        if not self._take_tick_token():
            return  # policy ticks came faster than one a period: the next tick takes the newest
        self._next_policy_period_ns = stamps.next_period_start_ns(self._policy_stamp_ns, self._period_ns)
        self._timer.reset()
        self._tick_in_real_time(by_policy=True)  # on the sensing polled above

    def _on_policy_now(self, msg: JointState) -> None:
        """Real time, without the message's info: arrived when its callback runs (later than DDS
        received it by the executor's delay, which only makes the command look that much fresher;
        its data's age, tick_overrun, is judged by its stamp all the same)."""
        self._on_policy_in_real_time(msg, {})

    def _realtime_tick(self) -> None:
        """Real time, every period on the steady clock from the last policy tick: a tick unless a
        policy command ticked less than POLICY_TICK_SLACK periods ago. While the policy streams,
        its commands drive the ticks and this timer stays quiet; once it stops (or stalls), the
        timer ticks every period, at most 2 periods after the policy's last tick."""
        if self._last_tick_by_policy and time.monotonic() - self._last_tick_monotonic < POLICY_TICK_SLACK * self.period:
            return
        self._tick_in_real_time(by_policy=False)

    def _take_tick_token(self) -> bool:
        """Policy ticks average one per command period: a bucket refilled at one token a period,
        holding TICK_BURST. A stamp that runs ahead of the clock, or two policies on different
        time lines, get no more ticks (and the driver no more commands) than the period allows.
        Timer ticks take no token (the checks must run, and a timer tick must
        not use up the policy's next one); the timer only ticks while the policy does not."""
        now = time.monotonic()
        self._tick_tokens = min(TICK_BURST, self._tick_tokens + (now - self._tokens_at) / self.period)
        self._tokens_at = now
        if self._tick_tokens < 1.0:
            return False
        self._tick_tokens -= 1.0
        return True

    def _tick_in_real_time(self, by_policy: bool) -> None:
        if not by_policy:  # a policy tick polled the sensing as its command came in
            self._poll_inputs()
        self._last_tick_monotonic, self._last_tick_by_policy = time.monotonic(), by_policy
        self._tick(round(self._now() * 1e9))

    def _command_msg(self, command, stamp) -> JointState:
        msg = JointState(
            name=self.profile.joint_names,
            position=command.position.tolist(),
            velocity=command.velocity.tolist(),
            effort=command.effort.tolist(),
        )
        msg.header.stamp = stamp
        return msg

    def _maybe_tick(self) -> None:
        """Lockstep: a tick when the clock reached the next period boundary."""
        if self.sim_time and self.inputs.joint_position is None:
            # Lockstep ticks on the sim's states: a policy command (or the watchdog) before the
            # first state must not use up the tick, or the state at that time is never answered
            # and the sim waits for ever (seen: the panda lockstep demo, policy first by a hair).
            return
        now_ns = round(self._now() * 1e9)
        if now_ns < self._next_tick_ns:
            if not stamps.tick_due(now_ns, self._next_tick_ns, self._period_ns):
                return
            self.get_logger().warning(
                f"the clock jumped back {(self._next_tick_ns - now_ns) * 1e-9:.3f} s: ticking on the new time line"
            )
        self._next_tick_ns = stamps.next_period_start_ns(now_ns, self._period_ns)
        self._tick(now_ns)

    def _tick(self, now_ns: int) -> None:
        """The core's decision at ``now_ns`` out: the command to the robot and the status."""
        now = now_ns * 1e-9
        before = self.core.mode
        self.inputs.commands_received = self._driver_listening() if before == Mode.STANDBY else None
        decision = self.core.tick(self.inputs, now)
        if decision.command is not None:
            self._start_teleop_session_on_takeover(before, decision.command.position)
        for event in decision.events:
            # One call site per severity: rclpy refuses a call site whose severity changes
            # (ValueError), which once stopped this node at its first operator event after a trip.
            if "operator" in event:
                self.get_logger().info(event)
            else:
                self.get_logger().error(event)
        stamp = self.get_clock().now().to_msg() if not self.sim_time else stamps.to_msg(now_ns)
        if decision.command is not None:
            msg = self._command_msg(decision.command, stamp)
            self._command_pub.publish(msg)
            self._last_command, self._answered_ns = msg, self._latest_state_ns
        self._publish_status(decision, stamp)

    def _publish_status(self, decision, stamp) -> None:
        values = [
            KeyValue(key="mode", value=decision.mode.value),
            KeyValue(key="last_trip", value=self.core.last_trip or "none"),
            KeyValue(key="trips", value=str(self.core.trips)),
            KeyValue(key="refused_messages", value=str(self.refused_messages)),
            KeyValue(key="dds_security", value=self.dds_security.describe()),
        ]
        for check in decision.checks:
            values.append(
                KeyValue(
                    key=f"check/{check.name}",
                    value="ok" if check.ok else f"FAIL ({check.response.name.lower()}): {check.detail}",
                )
            )
        status = DiagnosticStatus(
            level=LEVELS[decision.mode],
            name="safety_supervisor: mode",
            message=decision.mode.value,
            hardware_id=self.profile.name,
            values=values,
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = stamp
        self._status_pub.publish(array)

    def stop(self) -> None:
        """Leaving: one last command that holds the joints where they are (lifecycle.run calls this)."""
        self._poll_inputs()  # real time: where the joints are now, not at the last tick
        command = self.core.stop_command(self.inputs, self._now())
        if command is None:
            return
        self._command_pub.publish(self._command_msg(command, self.get_clock().now().to_msg()))
        self.get_logger().info("stopping: last command holds the joints where they are")
        try:  # reliable QoS: let it reach the driver before the process leaves
            self._command_pub.wait_for_all_acked(rclpy.duration.Duration(seconds=0.5))
        except Exception:
            time.sleep(0.1)

    def _driver_listening(self) -> bool:
        """Whether the driver reads /joint_commands yet: DDS has matched it with the supervisor
        and the ROS graph names it (the failure collector and the policy runtime read the topic
        too, and often match first). With no ``driver`` named (an outside driver), any reader but
        this project's own nodes counts. Latched; a graph query per tick while waiting, in
        STANDBY only, and a warning every WAITING_WARN_S that names the readers seen."""
        if self._driver_matched:
            return True
        readers = []
        if self._command_pub.get_subscription_count() > 0:
            readers = [r.node_name for r in self.get_subscriptions_info_by_topic(self._command_pub.topic_name)]
            self._driver_matched = (
                self._driver in readers if self._driver else any(name not in PROJECT_READERS for name in readers)
            )
        if not self._driver_matched and time.monotonic() - self._waiting_since > WAITING_WARN_S:
            self.get_logger().warning(
                f"the stand-up waits where the robot lies: {self._driver or 'no robot driver'} does not read "
                f"/joint_commands yet (readers: {sorted(readers) or 'none'}); is it running, on this "
                "ROS_DOMAIN_ID?",
                throttle_duration_sec=WAITING_WARN_S,
            )
        return self._driver_matched

    def destroy_node(self) -> None:
        self._sensor_subs.destroy()
        super().destroy_node()


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("safety_supervisor", SafetySupervisorNode, args))


if __name__ == "__main__":
    main()
