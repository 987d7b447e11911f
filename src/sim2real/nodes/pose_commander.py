"""pose_commander: drives a robot through a scripted hold-then-move trajectory.

The stand-in controller for the demo and the graph tests until a trained policy
runs: it answers each ``/joint_states`` at the command period with a
``/policy/joint_commands`` stamped like the state it answers (so it works in real time
and in lockstep), measures tracking, prints a report and exits when the script ends.
Like a policy, it reaches the robot only through the safety supervisor, which is the
only publisher of ``/joint_commands``.

    ros2 run sim2real pose_commander --ros-args -p robot:=panda -p report_path:=runs/demo.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState

from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.pose_script import PoseScript, TrackingReport
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.params import declare

NS_PER_S = stamps.NS_PER_S


class PoseCommanderNode(Node):
    def __init__(self, **kwargs):
        super().__init__("pose_commander", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        self.profile = load_profile(robot)
        # Checked: NaN would become NaN targets, a negative period would loop forever in the state callback.
        self.script = PoseScript(
            self.profile.default_positions,
            self.profile.lower_limits,
            self.profile.upper_limits,
            hold=declare(self, "hold_duration", 3.0, "Seconds holding the default pose", at_least=0),
            move=declare(self, "move_duration", 6.0, "Seconds of sinusoidal joint motion", at_least=0),
            settle=declare(self, "settle_duration", 1.0, "Seconds holding again at the end", at_least=0),
            amplitude=declare(self, "amplitude", 0.2, "Joint amplitude in rad (capped by the limits)", at_least=0),
            frequency=declare(self, "frequency", 0.5, "Motion frequency in Hz", above=0),
        )
        command_period = declare(
            self, "command_period", 0.0, "Seconds between commands; 0 = the profile's policy period", at_least=0
        )
        self.report_path = declare(self, "report_path", "", "Write the tracking report as JSON here ('' = don't)")
        self.period_ns = round((command_period or self.profile.policy_period) * NS_PER_S)
        self.report = TrackingReport(self.profile.sensing_period)
        self.order = JointStateOrder(self.profile.joint_names, self.profile.name)
        self.repeated = stamps.RepeatedStamps()
        self.start_ns = None
        self.next_command_ns = None
        self.target = self.profile.default_positions
        self.done = False
        self.pub = self.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
        self.create_subscription(JointState, "/joint_states", self._on_state, qos.SENSOR_SUBSCRIBE)

    def _on_state(self, msg: JointState) -> None:
        if self.done:
            return
        stamp_ns = stamps.to_ns(msg.header.stamp)
        try:
            index = self.order.index_of(msg.name, msg.position, msg.velocity, msg.effort)
        except ValueError as exc:
            self.get_logger().warning(f"ignoring {exc}", throttle_duration_sec=2.0)
            return
        if self.start_ns is None or stamps.jumped_back(stamp_ns, self.next_command_ns, self.period_ns):
            if self.start_ns is not None:
                self.get_logger().warning(
                    "/joint_states stamps jumped back (robot or sim restarted?): the "
                    "script starts again on the new time line"
                )
            self.start_ns = stamp_ns
            # Command on the period grid of sim time (as policy_runtime does): the supervisor ticks on
            # that grid and, in lockstep, waits for this node's answer to each tick's state.
            self.next_command_ns = -(-stamp_ns // self.period_ns) * self.period_ns
        if self.repeated.stuck(stamp_ns):  # the script's clock is the states' stamps: they must move
            self.get_logger().error(
                f"{stamps.RepeatedStamps.LIMIT} /joint_states in a row carry the same "
                "header.stamp: the driver does not stamp its states, so the script cannot advance"
            )
        t = (stamp_ns - self.start_ns) / NS_PER_S
        measured = np.asarray(msg.position, dtype=float)[index]
        phase = self.script.phase(t)
        self.report.add(phase, stamp_ns / NS_PER_S, measured, self.target)
        if phase == "done":
            self._finish()
            return
        if stamp_ns >= self.next_command_ns:
            self.target = self.script.target(t)
            command = JointState(name=self.profile.joint_names, position=self.target.tolist())
            command.header.stamp = msg.header.stamp
            self.pub.publish(command)
            while self.next_command_ns <= stamp_ns:
                self.next_command_ns += self.period_ns

    def _finish(self) -> None:
        self.done = True
        summary = self.report.summary()
        self.get_logger().info("tracking report: " + json.dumps(summary, indent=None))
        if self.report_path:
            path = Path(self.report_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"robot": self.profile.name, **summary}, indent=2))
            self.report.save_series(path.with_suffix(".npz"), self.profile.joint_names)


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("pose_commander", PoseCommanderNode, args, until=lambda node: node.done))


if __name__ == "__main__":
    main()
