"""hardware:=ros2_control through a real graph: the plan's bridge drives a double of a
ros2_control arm that speaks ros2_control's topics (no controller_manager is on PyPI).

The double behaves like ros2_control's mock_components/GenericSystem behind a
joint_state_broadcaster and a forward_command_controller: it takes Float64MultiArray
commands on /<controller>/commands in the controller's joint order, mirrors them into
its state, and publishes /joint_states in its own order with an extra gripper joint.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Float64MultiArray

from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.nodes import qos
from tests.ros.conftest import RECORD, wait_for

pytestmark = pytest.mark.ros

PANDA = load_profile("panda")
STARTUP_S = 20.0


class MockRos2ControlArm:
    """Mirrors commanded positions into /joint_states, in the hardware's own joint order."""

    def __init__(self, probe, controller: str, controller_joints: list[str]):
        self.controller_joints = controller_joints
        # joint_state_broadcaster publishes in interface order, here not the profile's, plus a gripper.
        self.state_names = sorted(PANDA.joint_names) + ["panda_finger_joint1"]
        self.position = {name: 0.0 for name in self.state_names}
        self.position.update(dict(zip(PANDA.joint_names, PANDA.default_positions)))
        self.commands: list[list[float]] = []
        self.lock = threading.Lock()
        probe.node.create_subscription(Float64MultiArray, f"/{controller}/commands", self._on_command, 10)
        self.publisher = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
        self.clock = probe.node.get_clock()
        probe.node.create_timer(0.005, self._publish)

    def _on_command(self, msg: Float64MultiArray) -> None:
        with self.lock:
            self.commands.append(list(msg.data))
            if len(msg.data) == len(self.controller_joints):  # a real controller rejects a wrong size
                self.position.update(dict(zip(self.controller_joints, msg.data)))

    def _publish(self) -> None:
        with self.lock:
            msg = JointState(
                name=self.state_names,
                position=[self.position[n] for n in self.state_names],
                velocity=[0.0] * len(self.state_names),
                effort=[0.0] * len(self.state_names),
            )
        msg.header.stamp = self.clock.now().to_msg()
        self.publisher.publish(msg)


def hold_the_deadman(probe) -> None:
    """An operator's pad (sensor_msgs/Joy at the joy driver's 20 Hz) holding the deadman: on
    hardware the supervisor engages, and stays engaged, only while it is held."""
    button = load_safety_config("panda").buttons["deadman"]
    publisher = probe.node.create_publisher(Joy, "/joy", 10)
    buttons = [1 if i == button else 0 for i in range(8)]
    probe.node.create_timer(0.05, lambda: publisher.publish(Joy(buttons=buttons)))


def test_supervisor_commands_reach_the_controller_in_its_joint_order(probe, start_graph):
    controller_joints = PANDA.joint_names[3:] + PANDA.joint_names[:3]
    arm = MockRos2ControlArm(probe, "arm_controller", controller_joints)
    hold_the_deadman(probe)
    commands = probe.record(JointState, "/joint_commands", RECORD)
    status = probe.record(DiagnosticArray, "/safety/status", 10)
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 10)
    start_graph(
        robot="panda",
        hardware="ros2_control",
        controller="arm_controller",
        controller_joints=",".join(controller_joints),
        demo="true",
        autoengage="true",
    )

    def mode():
        return status[-1].status[0].message if status else None

    assert wait_for(lambda: mode() == "ACTIVE", STARTUP_S), f"supervisor mode {mode()}"
    # The pose commander's script moves the joints away from the default pose through the supervisor.
    default_in_controller_order = np.asarray(PANDA.default_positions)[
        [PANDA.joint_names.index(j) for j in controller_joints]
    ]
    assert wait_for(
        lambda: (
            len(arm.commands) > 50 and np.max(np.abs(np.asarray(arm.commands[-1]) - default_in_controller_order)) > 0.05
        ),
        20.0,
    ), "the arm never moved off its default pose"

    # Every controller command is a supervisor command, reordered by name.
    supervisor = {
        tuple(np.round(np.asarray(m.position)[[PANDA.joint_names.index(j) for j in controller_joints]], 9))
        for m in list(commands)
    }
    sent = list(arm.commands)[-20:]
    assert all(len(c) == len(controller_joints) for c in sent)
    assert all(tuple(np.round(c, 9)) in supervisor for c in sent[:-2])

    # The loop closes through the mock hardware's /joint_states: the supervisor tracks no limit trips.
    assert mode() == "ACTIVE", status[-1].status[0].values
    bridge = [s for a in list(diagnostics) for s in a.status if s.name.startswith("ros2_control_bridge")]
    assert bridge and {kv.key: kv.value for kv in bridge[-1].values}["refused"] == "0"


def test_a_controller_without_every_joint_is_refused_before_anything_starts(start_graph):
    from sim2real.graph.plan import PlanError

    with pytest.raises(PlanError, match="missing profile joints"):
        start_graph(robot="panda", hardware="ros2_control", controller_joints="panda_joint1")


def test_a_first_command_that_names_only_some_joints_is_refused(make_any):
    """The others have no target yet: a default pose would make them jump (the mapper refuses it)."""
    from sim2real.nodes.ros2_control_bridge import Ros2ControlBridgeNode

    node = make_any(Ros2ControlBridgeNode, command_writer="")  # handlers driven directly: no publisher to check
    node._on_command(JointState(name=["panda_joint1"], position=[0.3]), {})
    assert (node.forwarded, node.refused) == (0, 1)
    node._on_command(JointState(name=list(PANDA.joint_names), position=[float(v) for v in PANDA.default_positions]), {})
    node._on_command(JointState(name=["panda_joint1"], position=[0.3]), {})  # after a full one: fine
    assert (node.forwarded, node.refused) == (2, 1)
