"""demo_script: the operator of the main job. Plays a scripted /cmd_vel (quadruped) or
/goal_pose (arm) sequence, records what the robot did, writes a report and exits.

The script clock is the /joint_states stamps, so it plays the same in real time and
in lockstep. In lockstep every state and ground truth is taken (the scored motion is a series
at the sensing rate, 500 Hz on the Go2); in real time the newest of each, 50 times a second
(a 50 Hz series: the report's sample count is a tenth, and the path length summed over it
leaves out the trunk's sway between samples). It starts when the safety
supervisor first reports ACTIVE (the policy is driving), not at the first state: how long
DDS discovery and the policy's first answer take varies from run to run, and a script that
started before engagement would score the unengaged robot. Until then it publishes the
script's first segment; if no ACTIVE comes within ``start_timeout`` seconds of the first
state (an operator who never engages), it starts anyway and says so. The report holds the motion figures
(core/command_script.py), when the script started, the safety supervisor's mode changes
and the policy runtime's last diagnostics.

    ros2 run sim2real demo_script --ros-args -p robot:=go2 -p report_path:=runs/demo/report.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import JointState

from sim2real.core import command_script
from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.params import declare
from sim2real.nodes.polled import Inputs

PUBLISH_PERIOD_S = 0.1
SAMPLE_PERIOD_S = 0.02  # real time: the script's clock and the scored motion at 50 Hz


class DemoScriptNode(Node):
    def __init__(self, **kwargs):
        super().__init__("demo_script", **kwargs)
        self.profile = load_profile(declare(self, "robot", "go2", "Robot profile name or path"))
        self.report_path = declare(self, "report_path", "", "Write the report (JSON, + .npz motion) here")
        self.quadruped = self.profile.kind == "quadruped"
        self.script = command_script.WALK_SCRIPT if self.quadruped else command_script.REACH_SCRIPT
        self.duration = declare(
            self,
            "duration",
            command_script.WALK_DURATION if self.quadruped else command_script.REACH_DURATION,
            "Seconds the script runs",
        )
        self.recorder = command_script.DemoRecorder(self.profile.kind)
        self.kinematics = None if self.quadruped else Kinematics(self.profile)
        self.start_timeout = declare(
            self,
            "start_timeout",
            20.0,
            "Seconds (of /joint_states time) to wait for the supervisor's "
            "first ACTIVE before starting the script anyway",
        )
        self.first_state_ns = None
        self.latest_state_ns = None
        self.start_ns = None
        self.started_by = ""
        self.t = 0.0
        self.q = None
        self.order = JointStateOrder(self.profile.joint_names, self.profile.name)
        self.events: list[dict] = []
        self.runtime_diagnostics: dict[str, str] = {}
        self.done = False
        self._last_mode = None
        self._published_segment = None  # the script segment whose command went out last
        self._cmd_pub = self.create_publisher(Twist, "/cmd_vel", 10)
        self._goal_pub = self.create_publisher(PoseStamped, "/goal_pose", 10)
        # Lockstep: every state and ground truth as it comes (the run is the same on any machine).
        # Real time: the newest of each every SAMPLE_PERIOD_S, for a node that only scores the run.
        self.sim_time = self.get_parameter("use_sim_time").value
        self._sample_subs = Inputs(self, polled=not self.sim_time, suffix="samples")
        self._sample_subs.subscribe(JointState, "/joint_states", self._on_joint_states, qos.SENSOR_SUBSCRIBE)
        self._sample_subs.subscribe(Odometry, "/sim/ground_truth", self._on_truth, qos.SENSOR_SUBSCRIBE)
        if not self.sim_time:
            # On the steady clock: a system clock stepped back (NTP) must not stop the sampling.
            self.create_timer(
                SAMPLE_PERIOD_S, self._sample_subs.take_newest_each, clock=Clock(clock_type=ClockType.STEADY_TIME)
            )
        self.create_subscription(DiagnosticArray, "/safety/status", self._on_safety, 10)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.create_timer(PUBLISH_PERIOD_S, self._publish_command)

    def _on_joint_states(self, msg: JointState, received: float | None = None) -> None:
        try:  # a callback that raises ends the node
            index = self.order.index_of(msg.name, msg.position, msg.velocity, msg.effort)
        except ValueError as exc:
            self.get_logger().warning(f"ignoring {exc}", throttle_duration_sec=2.0)
            return
        now = stamps.to_ns(msg.header.stamp)
        self.latest_state_ns = now
        self.first_state_ns = now if self.first_state_ns is None else self.first_state_ns
        self.q = np.asarray(msg.position, dtype=float)[index]
        if self.start_ns is None:
            if (now - self.first_state_ns) * 1e-9 < self.start_timeout:
                return
            self._start("timeout")
            self.get_logger().warning(
                f"the safety supervisor did not report ACTIVE within {self.start_timeout:g} s of the first "
                "/joint_states: the script starts anyway (engage with `ros2 service call "
                "/safety_supervisor/engage std_srvs/srv/Trigger`, or raise start_timeout)"
            )
        self.t = (now - self.start_ns) * 1e-9
        segment, command = command_script.segment_at(self.script, self.t)
        if segment != self._published_segment:
            # A new command goes out with the state that starts it, not at the next tick of the
            # 10 Hz timer: in lockstep that timer's phase against the script's start depends on
            # when the supervisor engaged, and a goal 0-100 ms late made two runs differ.
            self._publish_command()
        if not self.quadruped and not self.done:
            self.recorder.add(self.t, segment, self.q, command, self.kinematics.end_effector_position(self.q))
        if self.t >= self.duration and not self.done:
            self._finish()

    def _start(self, reason: str) -> None:
        self.start_ns = self.latest_state_ns
        self.started_by = reason

    def _on_truth(self, msg: Odometry, received: float | None = None) -> None:
        if not self.quadruped or self.start_ns is None or self.done:
            return
        segment, command = command_script.segment_at(self.script, self.t)
        p, o, v, w = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist.linear, msg.twist.twist.angular
        self.recorder.add(
            self.t,
            segment,
            self.q,
            command,
            (v.x, v.y, w.z),  # twist: body frame
            base_position=(p.x, p.y, p.z),
            base_orientation=(o.x, o.y, o.z, o.w),
        )

    def _on_safety(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.message == "ACTIVE" and self.start_ns is None and self.latest_state_ns is not None:
                self._start("active")
            if status.message != self._last_mode:
                trip = next((kv.value for kv in status.values if kv.key == "last_trip"), "")
                # Stamped in /joint_states time; made relative to the script start in the report.
                self.events.append({"stamp_ns": self.latest_state_ns, "mode": status.message, "last_trip": trip})
                self._last_mode = status.message

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith("policy_runtime"):
                # Merged: the runtime reports its policy and its latency as two statuses.
                self.runtime_diagnostics.update({kv.key: kv.value for kv in status.values})

    def _publish_command(self) -> None:
        if self.latest_state_ns is None or self.done:
            return
        segment, values = command_script.segment_at(self.script, self.t)  # t stays 0 until the script starts
        self._published_segment = segment
        if self.quadruped:
            twist = Twist()
            twist.linear.x, twist.linear.y, twist.angular.z = values
            self._cmd_pub.publish(twist)
        else:
            goal = PoseStamped()
            goal.header.frame_id = self.profile.base_link
            goal.header.stamp = self.get_clock().now().to_msg()
            goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = values
            goal.pose.orientation.w = 1.0
            self._goal_pub.publish(goal)

    def _finish(self) -> None:
        self.done = True
        for event in self.events:  # negative: before the script started
            stamp = event.pop("stamp_ns")
            event["t"] = round(((stamp or self.start_ns) - self.start_ns) * 1e-9, 3)
        report = {
            "robot": self.profile.name,
            "summary": self.recorder.summary(),
            "script_start": {
                "by": self.started_by,
                "after_first_state_s": round((self.start_ns - self.first_state_ns) * 1e-9, 3),
            },
            "supervisor_modes": self.events,
            "policy_runtime": self.runtime_diagnostics,
        }
        self.get_logger().info("demo report: " + json.dumps(report["summary"]))
        if self.report_path:
            path = Path(self.report_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(report, indent=2))
            self.recorder.save(path.with_suffix(".npz"))

    def destroy_node(self) -> None:
        self._sample_subs.destroy()
        super().destroy_node()


def main(args=None) -> NoReturn:
    lifecycle.exit_process(
        lifecycle.run(
            "demo_script",
            DemoScriptNode,
            args,
            until=lambda node: node.done,
            executor=lifecycle.events_executor_unless_lockstep,
        )
    )


if __name__ == "__main__":
    main()
