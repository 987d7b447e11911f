"""failure_collector: keeps the last seconds of the robot's topics and writes them out when it fails.

Thin adapter around :mod:`sim2real.core.failure_collector`. Every configured topic
(``config/failures/default.yaml``) is subscribed raw: the serialized CDR bytes go into a
ring buffer untouched, and a bundle writes them as they came. Only the topics triggers
look at are deserialized: /safety/status (mode), /imu/data (tilt, every
``IMU_DECIMATION``-th message), /policy/joint_commands (NaN, saturation), /diagnostics
(latency). A timer sends due events to the writer thread and watches for silent sensors.

Triggers: supervisor entering DAMPING or ESTOP, fall (tilt), non-finite or saturated
policy output, policy tick latency p99 overrun, a sensor gone silent, and
``~/snapshot`` (std_srvs/Trigger) for an operator. Bundles go to ``output_dir``
(``sim2real failures list`` reads them).

    ros2 run sim2real failure_collector --ros-args -p robot:=go2 -p output_dir:=/data/failures
    ros2 service call /failure_collector/snapshot std_srvs/srv/Trigger
"""
from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.srv import GetParameters
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger as TriggerSrv

from sim2real.core.bags import imu_orientation
from sim2real.core.failure_collector import FailureCollector, FailureDetector, Trigger
from sim2real.core.failure_config import load_failure_config
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle
from sim2real.nodes.params import declare

IMU_DECIMATION = 5           # fall detection at 100 Hz of a 500 Hz IMU is plenty
POLL_PERIOD_S = 0.05
DIAGNOSTICS_PERIOD_S = 1.0
# Best effort matches every publisher (reliable or not) and never slows one down; deep,
# because a lockstep sim delivers a burst of samples per command period.
RECORD_QOS = QoSProfile(history=QoSHistoryPolicy.KEEP_LAST, depth=100,
                        reliability=QoSReliabilityPolicy.BEST_EFFORT, durability=QoSDurabilityPolicy.VOLATILE)


def message_class(msgtype: str):
    """``sensor_msgs/msg/JointState`` -> the rclpy message class."""
    package, kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"message type {msgtype!r} is not installed ({exc}); install its package "
                         f"(pip: ros-{package.replace('_', '-')}) or remove the topic from the failure config") from None


class FailureCollectorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("failure_collector", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        config_name = declare(self, "failure_config", "default",
                              "Failure collector config: a name under config/failures/ or a path")
        output_dir = declare(self, "output_dir", "", "Folder for failure bundles; '' = the config's output_dir")
        conditions = declare(self, "conditions", "", "Physical conditions the robot runs under, as YAML, written to "
                                                     "failure.json for replay; '' = ask /sim_robot for its own")
        identified = declare(self, "identified_config", "",
                             "Identified parameters YAML (sim2real sysid fit), written to failure.json if set")
        randomization = declare(self, "randomization", "",
                                "Randomization YAML the running policy should cover, written to failure.json")
        self.profile = load_profile(robot)
        self.config = load_failure_config(config_name)
        static: dict[str, Any] = {"robot": self.profile.name,
                                  "joint_names": list(self.profile.joint_names)}
        if conditions:
            static["conditions"] = yaml.safe_load(conditions) or {}
        for key, path in (("identified_config", identified), ("randomization_config", randomization)):
            if path:
                static[key] = {"path": str(Path(path).absolute()), "content": yaml.safe_load(Path(path).read_text())}
        detector = FailureDetector(self.config.triggers, self.profile.joint_names, self.profile.lower_limits,
                                   self.profile.upper_limits)
        self.collector = FailureCollector(self.config, output_dir or self.config.output_dir, static, detector,
                                          enrich=_add_policy_metadata, on_written=self._on_written)
        self._imu_count = 0
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        # In sim the conditions are sim_robot's parameter: asked for once it is up, so the plan
        # stays the same in sim and on hardware (where no sim_robot answers).
        self._sim_params = None if conditions else self.create_client(GetParameters, "/sim_robot/get_parameters")
        self._sim_future = None
        self._handlers = {"/safety/status": (DiagnosticArray, self._safety_status),
                          "/imu/data": (Imu, self._imu), "/policy/joint_commands": (JointState, self._policy),
                          "/diagnostics": (DiagnosticArray, self._diagnostics)}
        for spec in self.config.topics:
            self.create_subscription(message_class(spec.msgtype), spec.topic, self._recorder(spec.topic),
                                     RECORD_QOS, raw=True)
        self.create_service(TriggerSrv, "~/snapshot", self._snapshot)
        self.create_timer(POLL_PERIOD_S, self._poll)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        if self.collector.cleaned:
            self.get_logger().warning(f"removed {len(self.collector.cleaned)} partial bundle(s) an earlier run left "
                                      f"while writing: {[p.name for p in self.collector.cleaned]}")
        self.get_logger().info(f"buffering {len(self.config.topics)} topics "
                               f"({self.config.pre_event_s:g} s before, {self.config.post_event_s:g} s after a "
                               f"failure) into {self.collector.output_dir}")

    def _now_ns(self) -> int:
        # The ROS clock costs ~16 us a call, half of a message's budget; without sim time it
        # reads the system clock, which time.time_ns() reads directly.
        return self.get_clock().now().nanoseconds if self._sim_time else time.time_ns()

    def _recorder(self, topic: str):
        record = self.collector.record
        handler = self._handlers.get(topic)

        def on_message(data: bytes) -> None:
            t_ns = self._now_ns()
            record(topic, t_ns, data)
            if handler is not None:
                trigger = handler[1](data)
                if trigger is not None:
                    self._fire(trigger, t_ns)
        return on_message

    # -- triggers (decode only what a detector needs) -----------------------------------------
    def _safety_status(self, data: bytes):
        msg = deserialize_message(data, DiagnosticArray)
        for status in msg.status:
            if status.name.startswith("safety_supervisor"):
                values = {kv.key: kv.value for kv in status.values}
                return self.collector.detector.safety_status(values.get("mode", status.message), values)
        return None

    def _imu(self, data: bytes):
        self._imu_count += 1
        if self._imu_count % IMU_DECIMATION:
            return None
        orientation = imu_orientation(data)
        if orientation is None:
            o = deserialize_message(data, Imu).orientation
            orientation = (o.x, o.y, o.z, o.w)
        return self.collector.detector.imu(orientation)

    def _policy(self, data: bytes):
        msg = deserialize_message(data, JointState)
        return self.collector.detector.policy_command(msg.name, msg.position)

    def _diagnostics(self, data: bytes):
        fired = None
        for status in deserialize_message(data, DiagnosticArray).status:
            if status.name.startswith(self.get_name()):
                continue
            trigger = self.collector.detector.diagnostics_status(status.name, {kv.key: kv.value
                                                                               for kv in status.values})
            fired = fired or trigger
        return fired

    def _fire(self, trigger: Trigger, t_ns: int) -> str:
        name = self.collector.trigger(trigger, t_ns)
        self.get_logger().error(f"failure: {trigger.reason}; bundle {name} after {self.config.post_event_s:g} s")
        return name

    def _snapshot(self, request, response):
        name = self._fire(Trigger("manual", "manual snapshot (~/snapshot)"), self._now_ns())
        response.success = True
        response.message = str(self.collector.output_dir / name)
        return response

    def _ask_sim_conditions(self) -> None:
        if self._sim_future is None:
            if self._sim_params.service_is_ready():
                self._sim_future = self._sim_params.call_async(GetParameters.Request(names=["conditions"]))
            return
        if self._sim_future.done():
            result = self._sim_future.result()
            if result is not None and result.values:
                text = result.values[0].string_value or "{}"
                # A new dict, not an update: the writer thread may be reading the old one.
                self.collector.static_info = {**self.collector.static_info, "hardware": "sim",
                                              "conditions": yaml.safe_load(text) or {}}
            self._sim_params = None

    def _poll(self) -> None:
        if self._sim_params is not None:
            self._ask_sim_conditions()
        now = self._now_ns()
        trigger = self.collector.detector.stale(now, self.collector.last_seen())
        if trigger is not None:
            self._fire(trigger, now)
        self.collector.poll(now)

    def _on_written(self, path, name: str, message: str) -> None:
        # Writer thread: rclpy's logger is thread-safe.
        (self.get_logger().info if path else self.get_logger().error)(message)

    def _publish_diagnostics(self) -> None:
        stats = self.collector.stats()
        level = DiagnosticStatus.WARN if stats["write_errors"] else DiagnosticStatus.OK
        status = DiagnosticStatus(level=level, name=f"{self.get_name()}: buffers", hardware_id=self.profile.name,
                                  message=f"{stats['bundles_written']} bundles in {self.collector.output_dir}",
                                  values=[KeyValue(key=k, value=str(v)) for k, v in stats.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)

    def stop(self) -> None:
        self.collector.stop()


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


def _events_executor():
    # rclpy's EventsExecutor dispatches each message without rebuilding a wait set: at ~1600
    # messages/s of raw bytes the default executor alone cost a third of a core (measured).
    from rclpy.experimental import EventsExecutor

    return EventsExecutor()


def main(args=None) -> int:
    return lifecycle.run("failure_collector", FailureCollectorNode, args, executor=_events_executor)


if __name__ == "__main__":
    raise SystemExit(main())
