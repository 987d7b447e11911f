"""sysid_logger: plays an excitation through the safety supervisor and records a sysid bag.

Thin adapter: the excitation (:mod:`sim2real.sysid.excitation`), the bag layout
(:mod:`sim2real.core.bags`) and the bag metadata (:mod:`sim2real.sysid.metadata`)
live in the ROS-free core. This node only sequences them:

1. record from the start: /joint_states, /imu/data, /joint_commands and ``extra_topics``,
   as the CDR bytes that arrive (``raw=True``: nothing is decoded or re-encoded);
2. once the supervisor has stood the robot up (STANDBY stand motion done), stream the
   default pose on /policy/joint_commands and call the supervisor's ``~/engage``. A trip
   before the engage is reset once; an e-stop, a second trip or ``start_timeout`` wall
   seconds without ACTIVE end the recording with the reason
   (:mod:`sim2real.sysid.engage_startup`);
3. in ACTIVE, after the supervisor's blend, stream the excitation target (position and
   velocity) on the command-period grid of the robot's clock, stamped like the state it
   answers (so it works in real time and in lockstep, as pose_commander does);
4. hold the default pose for ``settle`` s, close the bag and exit. If the supervisor
   leaves ACTIVE (a safety check tripped) the bag is closed with ``completed: false``.

    ros2 run sim2real sysid_logger --ros-args -p robot:=panda -p bag:=bags/panda_1
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from typing import NoReturn

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from sim2real.core.bags import TYPESTORE, BagWriter
from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.params import declare
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.engage_startup import EngageStartup, SupervisorView
from sim2real.sysid.excitation import make_excitation, recording_arguments
from sim2real.sysid.metadata import SUSPENDED, bag_custom_data
from sim2real.sysid.standing_check import require_standing

NS_PER_S = stamps.NS_PER_S
# Reliable and deep: matches a reliable publisher without dropping a burst; a best-effort
# publisher (some drivers) matches the sensor subscription below instead.
RECORD_RELIABLE = QoSProfile(history=QoSHistoryPolicy.KEEP_LAST, depth=200, reliability=QoSReliabilityPolicy.RELIABLE)
ENGAGE_RETRY_S = 1.0  # between engage (or reset) calls the supervisor refused
STARTUP_POLL_S = 0.2  # wall seconds between start-up decisions


class SysidLoggerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("sysid_logger", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        self.bag_path = declare(self, "bag", "", "rosbag2 directory to create (required; must not exist)")
        kind = declare(self, "kind", "fourier", "Excitation: fourier | multisine | chirp")
        duration = declare(self, "duration", 40.0, "Excitation seconds")
        joints = declare(self, "joints", "", "Comma-separated joints to excite ('' = all)")
        amplitude = declare(
            self,
            "amplitude",
            0.0,
            "Each joint's largest excursion, rad (limits may lower it); 0: "
            "0.6, or 0.1 for a quadruped standing on its feet",
        )
        legs = declare(
            self,
            "legs",
            -1,
            "A quadruped: 0 every joint at once, 1 one leg at a time, 2 a diagonal pair; -1: 1 standing, 0 suspended",
        )
        f_min = declare(self, "f_min", 0.1, "Lowest frequency, Hz")
        f_max = declare(self, "f_max", 1.0, "Highest frequency, Hz")
        velocity_fraction = declare(self, "velocity_fraction", 0.5, "Peak speed as a fraction of the velocity limit")
        seed = declare(self, "excitation_seed", 0, "Seed of the Fourier coefficient search")
        extra = declare(self, "extra_topics", "", "Comma-separated 'topic:pkg/msg/Type' to record as well")
        self.settle = declare(self, "settle", 1.0, "Seconds holding the default pose after the excitation", at_least=0)
        supervisor = declare(self, "supervisor", "/safety_supervisor", "The safety supervisor node")
        hardware = declare(
            self, "hardware", "", "Recorded in the bag metadata (sim | mujoco | topic | unitree | ros2_control)"
        )
        conditions = declare(self, "conditions", "", "Recorded in the bag metadata (sim conditions, if any)")
        suspended = declare(
            self,
            "suspended",
            False,
            "Recorded in the bag metadata: the robot hangs on a stand, feet "
            "clear of the ground (the fit replays it so)",
        )
        start_timeout = declare(
            self,
            "start_timeout",
            60.0,
            "Wall seconds to get the robot engaged before giving up with the reason",
            above=0,
        )
        if not self.bag_path:
            raise ValueError("parameter 'bag' is required: the rosbag2 directory to create")
        # Everything that can be refused is checked before the bag is created: a bag opened and
        # then abandoned has no metadata.yaml (unreadable) and blocks the same path next time.
        if Path(self.bag_path).exists():
            raise ValueError(
                f"parameter bag:={self.bag_path!r} exists already; a bag is never overwritten: "
                "choose a new directory or delete the old one"
            )
        extras = []
        for entry in [e for e in extra.split(",") if e.strip()]:
            topic, _, msgtype = entry.strip().partition(":")
            if msgtype not in TYPESTORE.types:
                raise ValueError(
                    f"extra_topics: {msgtype!r} is not a message type the bag writer knows (the "
                    "standard ROS 2 Humble set); record a standard type or leave it out"
                )
            extras.append((topic, _message_class(msgtype), msgtype))

        self.profile = load_profile(robot)
        if suspended:
            try:
                self.profile.check_suspendable()
            except ValueError as exc:
                raise ValueError(f"parameter suspended:=true: {exc}") from None
        safety = load_safety_config(self.profile.name)
        self.stand_s = safety.stand_duration
        self.blend_s = safety.blend_duration
        self.startup = EngageStartup(start_timeout)
        self.excitation = make_excitation(
            self.profile,
            seed=seed,
            **recording_arguments(
                self.profile, suspended, kind, joints, duration, amplitude, f_min, f_max, velocity_fraction, legs
            ),
        )
        # A standing robot must stay up under the plan: played in sim first, under the
        # conditions the simulated robot runs with (on hardware: nominal).
        standing = require_standing(
            self.profile,
            self.excitation,
            suspended,
            PhysicalConditions.from_yaml(conditions, "conditions") if conditions else None,
        )
        if standing is not None:
            self.get_logger().info(f"the excitation keeps the standing robot up in simulation: {standing.summary()}")
        metadata = {"hardware": hardware, "completed": "false", SUSPENDED: suspended}
        if conditions:
            metadata["sim_conditions"] = conditions
        self.bag = BagWriter(self.bag_path, bag_custom_data(self.profile, self.excitation, "sysid_logger", metadata))
        self.bag.open()
        self._record("/joint_states", JointState, "sensor_msgs/msg/JointState", qos.SENSOR_SUBSCRIBE)
        self._record("/imu/data", Imu, "sensor_msgs/msg/Imu", qos.SENSOR_SUBSCRIBE)
        self._record("/joint_commands", JointState, "sensor_msgs/msg/JointState", RECORD_RELIABLE)
        for topic, cls, msgtype in extras:
            self._record(topic, cls, msgtype, RECORD_RELIABLE)

        self.period_ns = round(self.profile.policy_period * NS_PER_S)
        self.pub = self.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
        self.create_subscription(JointState, "/joint_states", self._on_state, qos.SENSOR_SUBSCRIBE)
        self.create_subscription(DiagnosticArray, "/safety/status", self._on_status, 10)
        self.engage = self.create_client(Trigger, f"{supervisor}/engage")
        self.reset = self.create_client(Trigger, f"{supervisor}/reset")
        self.supervisor = SupervisorView()
        self.states_seen = False
        self.last_call_wall = -float("inf")
        # Wall time, also under sim time: the cap is the operator's wait, and a sim that never
        # starts has no clock to run out.
        self.create_timer(STARTUP_POLL_S, self._start_up, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.phase = "stand"  # stand -> engage -> blend -> excite -> settle -> done
        self.phase_start_ns = None
        self.next_command_ns = None
        self.order = JointStateOrder(self.profile.joint_names, self.profile.name)
        self.repeated = stamps.RepeatedStamps()
        self.done = False
        self.failed = ""
        self.get_logger().info(
            f"{self.profile.name}: {self.excitation.kind} excitation of "
            f"{len(self.excitation.excited)} joints for {duration:g} s -> {self.bag_path}"
        )

    def _record(self, topic: str, cls, msgtype: str, profile: QoSProfile) -> None:
        self.bag.add_topic(topic, msgtype)

        def write(data: bytes) -> None:
            if not self.done:
                self.bag.write_raw(topic, self.get_clock().now().nanoseconds, data)

        self.create_subscription(cls, topic, write, profile, raw=True)

    def _on_status(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if "mode" not in values:
                continue
            if self.mode != values["mode"]:
                self.get_logger().info(f"supervisor mode {values['mode']}")
            self.supervisor = SupervisorView.from_values(values)

    @property
    def mode(self) -> str:
        """The supervisor's mode in its last status ('' before one arrived)."""
        return self.supervisor.mode

    def _start_up(self) -> None:
        """Stand, engage, reset once or give up (wall-clock timer, until ACTIVE)."""
        if self.done or self.phase not in ("stand", "engage"):
            return
        now = time.monotonic()
        step = self.startup.step(now, self.states_seen, self.supervisor, stood=self.phase == "engage")
        if step.action == "give_up":
            self._finish(completed=False, reason=step.reason)
        elif step.action == "engaged" and self.phase == "engage":
            pass  # the next state moves on to the blend (on the states' clock)
        elif step.action in ("engage", "reset"):
            if step.first:
                self.get_logger().warning(step.reason)
            if step.action == "reset":
                self._enter("stand", None)  # stand again after the reset, then engage
            if now - self.last_call_wall < ENGAGE_RETRY_S and not step.first:
                return  # a reset decided now is asked at once: the decision is not repeated
            self.last_call_wall = now
            if step.action == "reset":
                self._call(self.reset, "reset")
            elif self.phase == "engage":
                self._call(self.engage, "engage")

    def _on_state(self, msg: JointState) -> None:
        if self.done:
            return
        now = stamps.to_ns(msg.header.stamp)
        if self.next_command_ns is not None and stamps.jumped_back(now, self.next_command_ns, self.period_ns):
            # More than two periods back: the robot or sim restarted under the recording.
            self._finish(
                completed=False,
                reason=f"/joint_states stamps jumped back during {self.phase} (robot or sim restarted?)",
            )
            return
        if self.repeated.stuck(now):  # the phases run on the states' stamps: they must move
            self.get_logger().error(
                f"{stamps.RepeatedStamps.LIMIT} /joint_states in a row carry the same "
                "header.stamp: the driver does not stamp its states, so the excitation "
                "cannot advance"
            )
        try:
            self.order.index_of(msg.name, msg.position, msg.velocity, msg.effort)
        except ValueError as exc:
            self.get_logger().error(f"ignoring {exc}", throttle_duration_sec=2.0)
            return
        self.states_seen = True
        if self.next_command_ns is None:
            self.next_command_ns = -(-now // self.period_ns) * self.period_ns
        if self.phase_start_ns is None:
            self.phase_start_ns = now
        if self._advance(now):
            return
        if self.phase != "stand" and now >= self.next_command_ns:
            self._publish_target(msg, now)

    def _advance(self, now: int) -> bool:
        """Move to the next phase when this one is over; True when the recording ended."""
        elapsed = (now - self.phase_start_ns) / NS_PER_S
        if self.phase == "stand" and elapsed >= self.stand_s + 0.5:
            self._enter("engage", now)
        elif self.phase == "engage" and self.mode == "ACTIVE":
            self._enter("blend", now)
        elif self.phase == "blend" and elapsed >= self.blend_s + 0.2:
            self._enter("excite", now)
        elif self.phase == "excite" and elapsed >= self.excitation.duration:
            self._enter("settle", now)
        elif self.phase == "settle" and elapsed >= self.settle:
            self._finish(completed=True)
            return True
        if self.phase in ("blend", "excite", "settle") and self.mode not in ("ACTIVE", ""):
            self._finish(completed=False, reason=f"the supervisor left ACTIVE ({self.mode}) during {self.phase}")
            return True
        return False

    def _publish_target(self, msg: JointState, now: int) -> None:
        """The excitation's target (the default pose outside the excitation), stamped like ``msg``."""
        if self.phase == "excite":
            q, dq = self.excitation.sample((now - self.phase_start_ns) / NS_PER_S)
        else:
            q, dq = self.profile.default_positions, None
        command = JointState(name=self.profile.joint_names, position=[float(v) for v in q])
        if dq is not None:
            command.velocity = [float(v) for v in dq]
        command.header.stamp = msg.header.stamp
        self.pub.publish(command)
        while self.next_command_ns <= now:
            self.next_command_ns += self.period_ns

    def _enter(self, phase: str, now: int | None) -> None:
        """``now`` None: the phase starts at the next state's stamp."""
        if phase != self.phase:
            self.get_logger().info(f"{self.phase} -> {phase}")
        self.phase = phase
        self.phase_start_ns = now

    def _call(self, client, action: str) -> None:
        if not client.service_is_ready():
            self.get_logger().info(f"waiting for the supervisor's {action} service", throttle_duration_sec=5.0)
            return

        def answered(future) -> None:
            error = future.exception()
            result = None if error is not None else future.result()
            message = result.message if result is not None else str(error)
            if result is None or not result.success:
                if action == "engage":
                    self.startup.engage_refusal = message
                else:
                    self.startup.reset_refusal = message
            self.get_logger().info(f"{action}: {message}", throttle_duration_sec=2.0)

        client.call_async(Trigger.Request()).add_done_callback(answered)

    def _finish(self, completed: bool, reason: str = "") -> None:
        self.done = True
        self.bag.set_custom_data("completed", json.dumps(completed))
        if reason:
            self.failed = reason
            self.bag.set_custom_data("aborted", reason)
            self.get_logger().error(f"excitation aborted: {reason}; bag kept with completed: false")
        self.bag.close()
        self.get_logger().info(f"bag written: {self.bag_path}")

    def stop(self) -> None:
        if not self.done:
            self._finish(completed=False, reason="stopped before the excitation finished")


def _message_class(msgtype: str):
    package, _, name = msgtype.partition("/msg/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        raise ValueError(
            f"extra_topics: message type {msgtype!r} cannot be imported; "
            "write 'topic:package/msg/Type' with an installed message package"
        ) from None


def main(args=None) -> NoReturn:
    code = {"value": 0}

    def finished(node) -> bool:
        if node.done and node.failed:
            code["value"] = 1
        return node.done

    result = lifecycle.run("sysid_logger", SysidLoggerNode, args, until=finished)
    lifecycle.exit_process(result or code["value"])


if __name__ == "__main__":
    main()
