"""failure_collector: keeps the last seconds of the robot's topics and writes them out when it fails.

Thin adapter around :mod:`sim2real.core.failure_capture`. Every configured topic
(``config/failures/default.yaml``) is subscribed raw: the serialized CDR bytes go into a
ring buffer untouched, and a bundle writes them as they came. Messages are taken in
batches, not one callback each: the recording subscriptions live on a second node that no
executor spins, and a timer every ``POLL_PERIOD_S`` drains them (see :meth:`_drain`).
Only the topics triggers look at are deserialized: /safety/status (mode), /imu/data (tilt,
every ``IMU_DECIMATION``-th message), /policy/joint_commands (NaN, saturation),
/diagnostics (latency). The same timer sends due events to the writer thread and watches
for silent sensors and a silent command stream.

Triggers: supervisor entering DAMPING or ESTOP, fall (tilt), non-finite or saturated
policy output, policy tick latency p99 overrun, a sensor gone silent, the supervisor's
/joint_commands gone silent (its process died or hung), and
``~/snapshot`` (std_srvs/Trigger) for an operator. Bundles go to ``output_dir``
(``sim2real failures list`` reads them).

    ros2 run sim2real failure_collector --ros-args -p robot:=go2 -p output_dir:=/data/failures
    ros2 service call /failure_collector/snapshot std_srvs/srv/Trigger
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.srv import GetParameters
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger as TriggerSrv

from sim2real.core import steady_time
from sim2real.core.bags import diagnostic_statuses, imu_orientation, joint_state_positions
from sim2real.core.failure_capture import FailureCollector, FailureDetector, Trigger, wall_to_clock
from sim2real.core.failure_config import load_failure_config
from sim2real.core.robot_profile import load_profile
from sim2real.core.steady_time import SteadyLine, SteadyReads
from sim2real.evaluate.reality import RealityError, load_reality
from sim2real.nodes import lifecycle
from sim2real.nodes.diagnostics import publish_status
from sim2real.nodes.imu_reading import imu_reading
from sim2real.nodes.params import declare
from sim2real.nodes.polled import companion_node, never_called

IMU_DECIMATION = 5  # fall detection at 100 Hz of a 500 Hz IMU is plenty
POLL_PERIOD_S = 0.05  # drain the subscriptions, start due writes, watch for silence
DIAGNOSTICS_PERIOD_S = 1.0
# Asked of sim_robot for failure.json (a reality robot's conditions stay hidden: its name is said).
SIM_PARAMETERS = ("conditions", "suspended", "engine", "model", "reality", "reality_robot")
SIM_PARAMETERS_TIMEOUT_S = 2.0  # s for sim_robot to answer before an unanswered name is asked again
SIM_PARAMETERS_WARN_AFTER = 5  # requests without an answer before the collector says so
# Best effort matches every publisher (reliable or not) and never slows one down. The DDS
# reader queue is the buffer between drains: 500 messages are 1 s at 500 Hz, 20 poll
# periods, enough for a timer a loaded machine delays and a lockstep sim's bursts.
RECORD_DEPTH = 500
RECORD_QOS = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=RECORD_DEPTH,
    reliability=QoSReliabilityPolicy.BEST_EFFORT,
    durability=QoSDurabilityPolicy.VOLATILE,
)


def message_class(msgtype: str):
    """``sensor_msgs/msg/JointState`` -> the rclpy message class."""
    package, kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"message type {msgtype!r} is not installed ({exc}); install its package "
            f"(pip: ros-{package.replace('_', '-')}) or remove the topic from the failure config"
        ) from None


class FailureCollectorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("failure_collector", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        config_name = declare(
            self, "failure_config", "default", "Failure collector config: a name under config/failures/ or a path"
        )
        output_dir = declare(self, "output_dir", "", "Folder for failure bundles; '' = the config's output_dir")
        conditions = declare(
            self,
            "conditions",
            "",
            "Physical conditions the robot runs under, as YAML, written to "
            "failure.json for replay; '' = ask /sim_robot for its own",
        )
        identified = declare(
            self,
            "identified_config",
            "",
            "Identified parameters YAML (sim2real sysid fit), written to failure.json if set",
        )
        randomization = declare(
            self, "randomization", "", "Randomization YAML the running policy should cover, written to failure.json"
        )
        self.profile = load_profile(robot)
        self.config = load_failure_config(config_name)
        static: dict[str, Any] = {"robot": self.profile.name, "joint_names": list(self.profile.joint_names)}
        if conditions:
            static["conditions"] = yaml.safe_load(conditions) or {}
        for key, path in (("identified_config", identified), ("randomization_config", randomization)):
            if path:
                static[key] = {"path": str(Path(path).absolute()), "content": yaml.safe_load(Path(path).read_text())}
        detector = FailureDetector(
            self.config.triggers, self.profile.joint_names, self.profile.lower_limits, self.profile.upper_limits
        )
        self._snapshots: dict[str, list[Future]] = {}  # bundle name -> the ~/snapshot calls awaiting it
        self._snapshot_lock = threading.Lock()
        self.collector = FailureCollector(
            self.config,
            output_dir or self.config.output_dir,
            static,
            detector,
            enrich=_add_policy_metadata,
            on_written=self._on_written,
        )
        self._imu_count = 0
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        # In sim the conditions are sim_robot's parameter: asked for once it is up, so the plan
        # stays the same in sim and on hardware (where no sim_robot answers).
        self._sim_params = None if conditions else self.create_client(GetParameters, "/sim_robot/get_parameters")
        self._sim_future = None
        self._sim_asked_at = 0.0
        self._sim_attempts = 0
        self._handlers = {
            "/safety/status": (DiagnosticArray, self._safety_status),
            "/imu/data": (Imu, self._imu),
            "/policy/joint_commands": (JointState, self._policy),
            "/diagnostics": (DiagnosticArray, self._diagnostics),
        }
        # Per-message executor dispatch is what cost the CPU (18-22 % of a core at 500 Hz
        # sensing; a bare node receiving only the two 500 Hz topics cost ~7 %): each message
        # woke the executor and ran a Python callback. The recording subscriptions sit on a
        # node no executor spins, so nothing wakes per message; DDS queues the messages
        # (RECORD_DEPTH) and the poll timer takes them in a tight loop.
        # Its names are this node's, resolved here: command-line remaps apply as before.
        self._recording = companion_node(self, "recording")
        self._drains = [
            (sub, spec.topic, self._handlers.get(spec.topic))
            for spec in self.config.topics
            for sub in [
                self._recording.create_subscription(
                    message_class(spec.msgtype), self.resolve_topic_name(spec.topic), never_called, RECORD_QOS, raw=True
                )
            ]
        ]
        self._clock_pair: tuple[int, int] | None = None  # (wall ns, sim ns) at the last drain
        # Real time: when each topic was last heard, on the steady clock (silence is measured on
        # it: a system clock stepped forward would otherwise make every stream look silent).
        self._heard_steady: dict[str, int] = {}
        self._drains_read = SteadyReads(SteadyLine())  # one read per drain
        self.create_service(TriggerSrv, "~/snapshot", self._snapshot)
        # Real time: on the steady clock, as silence is measured (a timer on the system clock
        # can wait out a step back before it fires again). Lockstep: the sim's clock.
        timer_clock = None if self._sim_time else Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(POLL_PERIOD_S, self._poll, clock=timer_clock)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics, clock=timer_clock)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        if self.collector.cleaned:
            self.get_logger().warning(
                f"removed {len(self.collector.cleaned)} partial bundle(s) an earlier run left "
                f"while writing: {[p.name for p in self.collector.cleaned]}"
            )
        self.get_logger().info(
            f"buffering {len(self.config.topics)} topics "
            f"({self.config.pre_event_s:g} s before, {self.config.post_event_s:g} s after a "
            f"failure) into {self.collector.output_dir}"
        )

    def _now_ns(self) -> int:
        # The ROS clock costs ~16 us a call, half of a message's budget; without sim time it
        # reads the system clock, which steady_time.system_ns() reads directly.
        return self.get_clock().now().nanoseconds if self._sim_time else steady_time.system_ns()

    def _drain(self) -> int:
        """Take every queued message of every recording subscription into the rings.

        A message's time is when DDS received it (its ``received_timestamp``, wall clock),
        not when it was drained, so the pre/post-event windows stay exact to the message.
        With sim time that wall time is mapped onto the sim clock by interpolating between
        this drain and the previous one."""
        record = self.collector.record
        wall_now = steady_time.system_ns()
        self._drains_read.begin()
        to_clock = None
        if self._sim_time:
            sim_now = self.get_clock().now().nanoseconds
            pair, self._clock_pair = self._clock_pair, (wall_now, sim_now)
            to_clock = wall_to_clock(pair, wall_now, sim_now)
        taken = 0
        for sub, topic, handler in self._drains:
            take, msg_type, raw = sub.handle.take_message, sub.msg_type, sub.raw
            newest_wall = None
            with sub.handle:  # what rclpy's executor does around take_message
                while True:
                    got = take(msg_type, raw)
                    if got is None:
                        break
                    data, info = got
                    t_ns = info.get("received_timestamp") or wall_now
                    if t_ns > wall_now:
                        t_ns = wall_now
                    newest_wall = t_ns
                    if to_clock is not None:
                        t_ns = to_clock(t_ns)
                    record(topic, t_ns, data)
                    taken += 1
                    if handler is not None:
                        trigger = handler[1](data)
                        if trigger is not None:
                            self._fire(trigger, t_ns)
            if newest_wall is not None:
                self._heard_steady[topic] = self._drains_read.receipt_ns(newest_wall)
        return taken

    # -- triggers (decode only what a detector needs) -----------------------------------------
    def _safety_status(self, data: bytes):
        for name, message, values in _statuses(data):
            if name.startswith("safety_supervisor"):
                return self.collector.detector.safety_status(values.get("mode", message), values)
        return None

    def _imu(self, data: bytes):
        self._imu_count += 1
        if self._imu_count % IMU_DECIMATION:
            return None
        orientation = imu_orientation(data)
        if orientation is None:
            try:  # another encoding: rclpy reads it
                orientation = imu_reading(data).orientation
            except ValueError:
                return None  # no Imu: recorded as it came, with no tilt to judge
        return self.collector.detector.imu(orientation)

    def _policy(self, data: bytes):
        command = joint_state_positions(data)
        if command is None:
            try:  # another encoding: rclpy reads it
                msg = deserialize_message(data, JointState)
            except Exception:
                return None  # no JointState: recorded as it came, with nothing to judge
            command = (msg.name, msg.position)
        return self.collector.detector.policy_command(*command)

    def _diagnostics(self, data: bytes):
        fired = None
        for name, _, values in _statuses(data):
            if name.startswith(self.get_name()):
                continue
            trigger = self.collector.detector.diagnostics_status(name, values)
            fired = fired or trigger
        return fired

    def _fire(self, trigger: Trigger, t_ns: int) -> str:
        name = self.collector.trigger(trigger, t_ns)
        self.get_logger().error(f"failure: {trigger.reason}; bundle {name} after {self.config.post_event_s:g} s")
        return name

    async def _snapshot(self, request, response):
        """Answers once the bundle is written (after the post-event window), or failed: a
        success with a path that never appears would tell an operator a bundle exists."""
        self._drain()  # the rings are current, and the detectors' context for failure.json
        written = Future()
        name = self._fire(Trigger("manual", "manual snapshot (~/snapshot)"), self._now_ns())
        with self._snapshot_lock:
            self._snapshots.setdefault(name, []).append(written)
        path, message = await written
        response.success = path is not None
        response.message = str(path) if path is not None else message
        return response

    def _ask_sim_conditions(self) -> None:
        # One request per name: rclpy answers nothing at all when any name asked is undeclared,
        # and a sim_robot older than `suspended` must still give its conditions.
        if self._sim_future is None:
            if self._sim_params.service_is_ready():
                self._sim_future = {
                    name: self._sim_params.call_async(GetParameters.Request(names=[name])) for name in SIM_PARAMETERS
                }
                self._sim_asked_at = time.monotonic()
            return
        pending = [name for name, future in self._sim_future.items() if not future.done()]
        if pending and time.monotonic() - self._sim_asked_at > SIM_PARAMETERS_TIMEOUT_S:
            # A response can be lost (rmw: "failed to send response (timeout)" from a sim_robot
            # busy starting up): ask those again, or the bundles never learn the engine and conditions.
            self._sim_attempts += 1
            if self._sim_attempts == SIM_PARAMETERS_WARN_AFTER:
                self.get_logger().warning(
                    f"sim_robot has not answered {pending} after {self._sim_attempts} "
                    "requests: bundles lack them until it does"
                )
            for name in pending:
                self._sim_future[name].cancel()
                self._sim_future[name] = self._sim_params.call_async(GetParameters.Request(names=[name]))
            self._sim_asked_at = time.monotonic()
            return
        if not pending:
            answers = {
                name: future.result().values[0]
                for name, future in self._sim_future.items()
                if future.result() is not None and future.result().values
            }
            if "conditions" in answers:
                # A new dict, built whole, not an update: the writer thread may be reading the old one.
                engine = answers["engine"].string_value if "engine" in answers else "pybullet"
                info = {
                    **self.collector.static_info,
                    "hardware": "mujoco" if engine == "mujoco" else "sim",
                    "engine": engine or "pybullet",
                    "model": (answers["model"].string_value or None) if "model" in answers else None,
                    "conditions": yaml.safe_load(answers["conditions"].string_value or "{}") or {},
                    "suspended": bool(answers["suspended"].bool_value) if "suspended" in answers else False,
                }
                if "reality" in answers and answers["reality"].string_value:
                    # Conditions unknown, as a real robot's: the pipeline reads identified ones. The
                    # set's model is no secret: a replay runs on it.
                    name = answers["reality"].string_value
                    del info["conditions"]
                    try:
                        info["model"] = load_reality(name, secret=False).model
                    except RealityError:  # the set's file went away since sim_robot read it
                        info["model"] = None
                    robot = answers["reality_robot"].integer_value if "reality_robot" in answers else 0
                    info["reality"] = f"{name} robot {robot}"
                self.collector.static_info = info
            self._sim_params = None

    def _poll(self) -> None:
        self._drain()  # first: a due event's window gets every message received until now
        if self._sim_params is not None:
            self._ask_sim_conditions()
        now = self._now_ns()
        if self._sim_time:  # lockstep: the sim's clock (it stops while the sim waits, and so does silence)
            trigger = self.collector.detector.stale(now, self.collector.last_seen())
        else:
            trigger = self.collector.detector.stale(self._drains_read.line.now_ns(), self._heard_steady)
        if trigger is not None:
            self._fire(trigger, now)
        self.collector.poll(now)

    def _on_written(self, path, name: str, message: str) -> None:
        # Writer thread: rclpy's logger is thread-safe.
        if path:  # one call site per severity (rclpy raises if a call site's severity changes)
            self.get_logger().info(message)
        else:
            self.get_logger().error(message)
        with self._snapshot_lock:
            waiting = self._snapshots.pop(name, [])
        for written in waiting:  # the ~/snapshot calls this bundle answers
            written.set_result((path, message))
        if waiting and self.executor is not None:
            self.executor.wake()

    def _publish_diagnostics(self) -> None:
        stats = self.collector.stats()
        level = DiagnosticStatus.WARN if stats["write_errors"] else DiagnosticStatus.OK
        publish_status(
            self,
            self._diag_pub,
            level,
            "buffers",
            f"{stats['bundles_written']} bundles in {self.collector.output_dir}",
            stats,
            self.profile.name,
        )

    def stop(self) -> None:
        self._drain()
        self.collector.stop()

    def destroy_node(self) -> None:
        self._recording.destroy_node()
        super().destroy_node()


def _statuses(data: bytes) -> list[tuple[str, str, dict[str, str]]]:
    """(name, message, values) of a serialized DiagnosticArray: read in place, or decoded."""
    statuses = diagnostic_statuses(data)
    if statuses is None:
        try:  # another encoding: rclpy reads it
            array = deserialize_message(data, DiagnosticArray)
        except Exception:
            return []  # no DiagnosticArray: recorded as it came, with nothing to judge
        statuses = [(s.name, s.message, {kv.key: kv.value for kv in s.values}) for s in array.status]
    return statuses


def _add_policy_metadata(info: dict) -> None:
    """Writer thread: the running policy's metadata, read from the file the runtime reports."""
    for status in (info.get("policy_runtime") or {}).values():
        path = status.get("policy_path")
        entry = {"path": path, "sha256": status.get("sha256")}
        try:
            import onnx

            model = onnx.load(path, load_external_data=False)
            entry["metadata"] = {p.key: _maybe_json(p.value) for p in model.metadata_props}
        except Exception as exc:  # the file may be gone or elsewhere (the runtime runs on another machine)
            entry["metadata_error"] = f"{type(exc).__name__}: {exc}"
        info["policy"] = entry
        return


def _maybe_json(text: str):
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def main(args=None) -> NoReturn:
    lifecycle.exit_process(
        lifecycle.run("failure_collector", FailureCollectorNode, args, executor=lifecycle.events_executor)
    )


if __name__ == "__main__":
    main()
