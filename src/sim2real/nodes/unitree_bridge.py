"""unitree_bridge: a Unitree Go2 as the hardware contract (``hardware:=unitree``).

Between our topics and the robot's own low-level DDS interface (not ROS: cyclonedds with
Unitree's types, :mod:`sim2real.core.unitree`):

- ``rt/lowstate`` (500 Hz) -> ``/joint_states`` (position, velocity, tau_est, matched to joints
  by name through the profile's motor table), ``/imu/data`` (the quaternion reordered to ROS's
  x, y, z, w), ``/joy`` (the remote's buttons, as the safety config's ``remote:`` maps them),
  ``/diagnostics`` (battery, motor temperatures, CRC and preflight state). A sample with a bad
  CRC or a tick that did not advance is dropped: the supervisor sees the stream go stale.
- ``/joint_commands`` (the supervisor's only) -> ``rt/lowcmd``: q, dq, tau and the profile's
  kp/kd per motor, sealed with the CRC the robot checks. The newest frame is sent again with
  every LowState received, so the robot's motors always have a fresh one.
- Before the first command, on a command timeout, until preflight passes and at shutdown: a
  damping frame (kp 0, kd = the profile's damping_kd), as the supervisor's DAMPING does.

Preflight (:mod:`sim2real.core.unitree.preflight`) runs over the first second of LowState and
again while it fails; no command is forwarded before it passes. ``sim2real preflight`` runs the
same checks from a terminal.

    ros2 run sim2real unitree_bridge --ros-args -p robot:=go2 -p network_interface:=eth0
"""
from __future__ import annotations

import collections
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState, Joy

from sim2real.core.joint_command import CommandRefused, JointCommandMapper
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.core.unitree.low_level import Go2LowLevel, LowStateReading
from sim2real.core.unitree.preflight import preflight
from sim2real.core.unitree.remote import joy_buttons
from sim2real.nodes import lifecycle, qos
from sim2real.nodes.command_source import CommandSource
from sim2real.nodes.params import declare

DIAGNOSTICS_PERIOD_S = 1.0
PREFLIGHT_WINDOW_S = 1.0
PREFLIGHT_EVERY_S = 0.25  # while it fails: a check walks the whole window
JOY_PERIOD_S = 0.02       # /joy while the remote's buttons do not change
WRITER_CHECK_PERIOD_S = 1.0
WARN_THROTTLE_S = 2.0


class UnitreeBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("unitree_bridge", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile with a unitree: section (motor table, head bytes)")
        interface = declare(self, "network_interface", "",
                            "Network interface on the robot's subnet (e.g. eth0); '' = cyclonedds' own choice")
        domain = declare(self, "unitree_domain", 0, "DDS domain of the robot's rt/lowstate and rt/lowcmd (the Go2: 0)")
        safety = declare(self, "safety_config", "", "Safety config whose remote: and joystick: map the remote's "
                                                    "buttons onto /joy; '' = the robot's name")
        self.profile = load_profile(robot)
        self.low_level = Go2LowLevel(self.profile)  # refuses a profile without a unitree: section
        config = load_safety_config(safety or self.profile.name)
        self.remote_map, self.joystick = config.remote, config.buttons
        self.command_timeout = self.profile.command_timeout
        self.mapper = JointCommandMapper(self.profile.joint_names, None)
        self.dds = UnitreeDds(domain, interface)
        self._lock = threading.Lock()
        self._frame = self.low_level.damping()  # sent until preflight passes and a command arrives
        self._last_command = -float("inf")
        self._window: collections.deque[tuple[float, LowStateReading]] = collections.deque()
        self._other_writers: list[str] = []
        self.preflight_failures: list[str] = ["no lowstate yet"]
        self.passed = False
        self.counts = collections.Counter()
        self._last_tick: int | None = None
        self._latest: LowStateReading | None = None
        self._preflight_at = -float("inf")
        self._joy_buttons: list[int] = []
        self._joy_at = -float("inf")
        self._stop = threading.Event()
        self.fault: lifecycle.NodeFault | None = None

        self._joint_pub = self.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
        self._imu_pub = self.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
        self._joy_pub = self.create_publisher(Joy, "/joy", qos.SENSOR_PUBLISH)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._source = CommandSource.declared(self, "/joint_commands")
        self.create_subscription(JointState, "/joint_commands", self._on_command, qos.COMMAND)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self.create_timer(WRITER_CHECK_PERIOD_S, self._check_writers)
        self.create_timer(self.command_timeout / 2, self._check_timeout)
        self._joint_msg = JointState(name=list(self.profile.joint_names))
        self._thread = threading.Thread(target=self._state_loop, name="unitree_lowstate", daemon=True)
        self.dds.write(self._frame)
        self.get_logger().info(f"{self.profile.name}: rt/lowstate -> /joint_states, /imu/data, /joy; /joint_commands "
                               f"-> rt/lowcmd (DDS domain {domain}, interface {interface or 'default'}); damping "
                               "until preflight passes")

    # -- rt/lowstate -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.dds.write(self.low_level.damping())  # the robot is left damped, never holding targets
        self.dds.close()

    def _state_loop(self) -> None:
        try:
            while not self._stop.is_set():
                for sample in self.dds.take_states(timeout=0.1):
                    self._on_state(sample, time.monotonic())
        except Exception as exc:  # noqa: BLE001 - the process must end, with the reason
            self.fault = lifecycle.NodeFault("the rt/lowstate loop", exc)

    def _on_state(self, sample, received: float) -> None:
        reading = self.low_level.read(sample)
        self._window.append((received, reading))
        while self._window and received - self._window[0][0] > PREFLIGHT_WINDOW_S:
            self._window.popleft()
        if not self.passed and received - self._preflight_at >= PREFLIGHT_EVERY_S:
            self._preflight_at = received
            self._run_preflight(received)
        if not reading.crc_ok:
            self.counts["bad_crc"] += 1
            return
        if self._last_tick is not None and reading.tick <= self._last_tick:
            self.counts["stale_tick"] += 1
            return
        self._last_tick = reading.tick
        self._latest = reading
        self.counts["states"] += 1
        stamp = self.get_clock().now().to_msg()
        msg = self._joint_msg
        msg.header.stamp = stamp
        msg.position, msg.velocity, msg.effort = (reading.position.tolist(), reading.velocity.tolist(),
                                                  reading.effort.tolist())
        self._joint_pub.publish(msg)
        imu = Imu()
        imu.header.stamp, imu.header.frame_id = stamp, self.profile.imu_link
        o, w, a = reading.orientation, reading.angular_velocity, reading.linear_acceleration
        imu.orientation.x, imu.orientation.y, imu.orientation.z, imu.orientation.w = map(float, o)
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = map(float, w)
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = map(float, a)
        # The Go2 reports no covariances: -1 in the first element marks "unknown" (sensor_msgs/Imu).
        imu.orientation_covariance[0] = imu.angular_velocity_covariance[0] = -1.0
        imu.linear_acceleration_covariance[0] = -1.0
        self._imu_pub.publish(imu)
        buttons = joy_buttons(reading.remote, self.remote_map, self.joystick)
        if buttons != self._joy_buttons or received - self._joy_at >= JOY_PERIOD_S:
            # A press at once (an e-stop reaches the supervisor within one LowState period); the
            # rest at the joystick's usual rate, not 500 Hz.
            self._joy_buttons, self._joy_at = buttons, received
            remote = reading.remote
            joy = Joy(buttons=buttons, axes=[remote.lx, remote.ly, remote.rx, remote.ry, remote.l2]
                      if remote.sticks_finite() else [0.0] * 5)
            joy.header.stamp = stamp
            self._joy_pub.publish(joy)
        with self._lock:
            frame = self._frame
        self.dds.write(frame)

    def _run_preflight(self, now: float) -> None:
        if not self._window or now - self._window[0][0] < 0.9 * PREFLIGHT_WINDOW_S:
            return
        failures = preflight(list(self._window), PREFLIGHT_WINDOW_S, self.profile, self._other_writers)
        if failures != self.preflight_failures:
            for line in failures:
                self.get_logger().error(f"preflight: {line}")
        self.preflight_failures = failures
        if not failures:
            self.passed = True
            self.get_logger().info("preflight passed: forwarding /joint_commands to rt/lowcmd")

    def _check_writers(self) -> None:
        self._other_writers = self.dds.other_command_writers()
        if self._other_writers and self.passed:
            # Another writer after preflight (sport mode restarted): stop commanding, damp, re-check.
            self.passed = False
            self.preflight_failures = ["another rt/lowcmd writer appeared"]
            with self._lock:
                self._frame = self.low_level.damping()
            self.get_logger().error(f"another writer on rt/lowcmd ({', '.join(self._other_writers)}): damping; "
                                    "commands wait for preflight")

    # -- /joint_commands -------------------------------------------------------------------
    def _on_command(self, msg: JointState, info: dict) -> None:
        if not self._source.accepts(info):
            self.get_logger().error(self._source.refusal(), throttle_duration_sec=WARN_THROTTLE_S)
            return
        if not self.passed:
            self.counts["refused_preflight"] += 1
            self.get_logger().warning("command not forwarded: preflight has not passed: "
                                      + "; ".join(self.preflight_failures), throttle_duration_sec=WARN_THROTTLE_S)
            return
        try:
            targets = self.mapper.apply(msg.name, msg.position, msg.velocity, msg.effort)
        except CommandRefused as exc:
            self.counts["refused"] += 1
            self.get_logger().warning(f"refused /joint_commands: {exc}; the last frame stays",
                                      throttle_duration_sec=WARN_THROTTLE_S)
            return
        frame = self.low_level.command(targets)
        with self._lock:
            self._frame = frame
            self._last_command = time.monotonic()
        self.dds.write(frame)
        self.counts["forwarded"] += 1

    def _check_timeout(self) -> None:
        with self._lock:
            late = time.monotonic() - self._last_command > self.command_timeout
            if late and self._last_command > -float("inf"):
                self._frame = self.low_level.damping()
                self._last_command = -float("inf")
                self.counts["timeouts"] += 1
                self.get_logger().warning(f"no /joint_commands for {self.command_timeout:g} s: damping")

    def _publish_diagnostics(self) -> None:
        latest = self._latest
        values = {**{k: str(v) for k, v in self.counts.items()}, "preflight": "passed" if self.passed else
                  "; ".join(self.preflight_failures), "refused_writers": str(self._source.refused)}
        if latest is not None:
            values["battery_voltage"] = f"{latest.battery_voltage:.2f}"
            values.update({f"temperature {name}": f"{t:.0f}"
                           for name, t in zip(self.profile.joint_names, latest.motor_temperature)})
        level = DiagnosticStatus.OK if self.passed else DiagnosticStatus.ERROR
        status = DiagnosticStatus(level=level, name=f"{self.get_name()}: Go2 low-level bridge",
                                  hardware_id=self.profile.name,
                                  message="forwarding" if self.passed else "preflight: " + "; ".join(self.preflight_failures),
                                  values=[KeyValue(key=k, value=v) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)


def main(args=None) -> int:
    return lifecycle.run("unitree_bridge", UnitreeBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
