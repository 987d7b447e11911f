"""ros2_control_bridge: the hardware contract's /joint_commands onto a ros2_control controller.

For a robot behind ros2_control (``hardware:=ros2_control``). Its ``joint_state_broadcaster``
already publishes ``/joint_states`` (every sim2real node matches joints by name, so its
order and any extra joints, e.g. a gripper, do not matter). What the contract lacks is
the command side: a ``forward_command_controller`` (e.g.
``position_controllers/JointGroupPositionController``) takes a ``std_msgs/Float64MultiArray``
on ``/<controller>/commands`` with one value per entry of its ``joints`` parameter, in that
order and without names. This node takes the supervisor's ``/joint_commands`` and
publishes their position targets in the controller's joint order.

With a position interface the hardware applies its own gains: the profile's kp/kd and
the command's velocity/effort fields are not sent (a log line says so at start).
A controller whose joints are not exactly the profile's is refused before anything moves.

    ros2 run sim2real ros2_control_bridge --ros-args -p robot:=panda \\
        -p controller:=forward_position_controller -p controller_joints:="[panda_joint1, ...]"
"""

from __future__ import annotations

from typing import NoReturn

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from sim2real.core.controller_joints import ControllerJointOrder
from sim2real.core.joint_command import CommandRefused, JointCommandMapper
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle, qos
from sim2real.nodes.command_source import CommandSource
from sim2real.nodes.diagnostics import publish_status
from sim2real.nodes.params import declare

DIAGNOSTICS_PERIOD_S = 1.0
WARN_THROTTLE_S = 2.0


class Ros2ControlBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("ros2_control_bridge", **kwargs)
        robot = declare(self, "robot", "panda", "Robot profile name or path")
        controller = declare(
            self,
            "controller",
            "forward_position_controller",
            "Name of the forward_command_controller (position interface); commands go to /<controller>/commands",
        )
        joints = declare(
            self,
            "controller_joints",
            [""],
            "The controller's `joints` parameter, in its order; empty = the profile's joint order",
        )
        if not controller.strip("/"):
            raise ValueError(
                "parameter controller:='' names no controller: give the forward_command_controller "
                "taking the commands (e.g. forward_position_controller)"
            )
        self.profile = load_profile(robot)
        self.order = ControllerJointOrder(self.profile.joint_names, [j for j in joints if j])
        # No initial pose: before any full command the arm may be anywhere (see JointCommandMapper).
        self.mapper = JointCommandMapper(self.profile.joint_names, None)
        self.topic = f"/{controller.strip('/')}/commands"
        self.forwarded = 0
        self.refused = 0
        # ros2_control's forward_command_controller subscribes with the system-default QoS
        # (reliable, volatile): a reliable depth-1 publisher matches it.
        self._pub = self.create_publisher(Float64MultiArray, self.topic, qos.COMMAND)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._source = CommandSource.declared(self, "/joint_commands")
        self.create_subscription(JointState, "/joint_commands", self._on_command, qos.COMMAND)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self.get_logger().info(
            f"{self.profile.name}: /joint_commands -> {self.topic} in order {self.order.controller_joints}; "
            "position targets only (the hardware's own gains apply; kp/kd, velocity and effort are not sent)"
        )

    def _on_command(self, msg: JointState, info: dict) -> None:
        # Two parameters, no default: rclpy passes MessageInfo (the publisher's gid) only then.
        if not self._source.accepts(info):
            self.get_logger().error(self._source.refusal(), throttle_duration_sec=WARN_THROTTLE_S)
            return
        try:
            targets = self.mapper.apply(msg.name, msg.position, msg.velocity, msg.effort)
        except CommandRefused as exc:
            self.refused += 1
            held = (
                "the controller keeps the last target" if self.forwarded else "nothing was sent to the controller yet"
            )
            self.get_logger().warning(f"refused /joint_commands: {exc}; {held}", throttle_duration_sec=WARN_THROTTLE_S)
            return
        self._pub.publish(Float64MultiArray(data=self.order.to_controller(targets.position)))
        self.forwarded += 1

    def _publish_diagnostics(self) -> None:
        values = {
            "controller_topic": self.topic,
            "forwarded": str(self.forwarded),
            "refused": str(self.refused),
            "refused_writers": str(self._source.refused),
            "controller_joints": ",".join(self.order.controller_joints),
        }
        level = DiagnosticStatus.WARN if self.refused else DiagnosticStatus.OK
        publish_status(
            self, self._diag_pub, level, "command bridge", f"{self.forwarded} forwarded", values, self.profile.name
        )


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("ros2_control_bridge", Ros2ControlBridgeNode, args))


if __name__ == "__main__":
    main()
