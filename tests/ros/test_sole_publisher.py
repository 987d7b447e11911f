"""A second graph in the same ROS_DOMAIN_ID is named, not silently shared: the supervisor and
the sim warn when /joint_commands or /joint_states has another publisher."""

from __future__ import annotations

import time

import pytest
from sensor_msgs.msg import JointState

from sim2real.nodes import qos
from tests.ros.conftest import wait_for

pytestmark = pytest.mark.ros


def test_another_commander_and_another_driver_are_named(start_graph, probe):
    graph = start_graph(robot="panda", only=["sim_robot", "safety_supervisor"])
    assert wait_for(lambda: "supervising at" in graph.log.text(), 30.0), graph.log.text()[-2000:]
    assert "publishers on" not in graph.log.text()
    # The probe stands in for a stray graph: it only needs to exist on the topics.
    probe.node.create_publisher(JointState, "/joint_commands", qos.COMMAND)
    probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    probe_name = f"/{probe.node.get_name()}"
    commanders = ", ".join(sorted(["/safety_supervisor", probe_name]))
    drivers = ", ".join(sorted(["/sim_robot", probe_name]))
    assert wait_for(
        lambda: (
            f"2 publishers on /joint_commands ({commanders})" in graph.log.text()
            and f"2 publishers on /joint_states ({drivers})" in graph.log.text()
        ),
        15.0,
    ), graph.log.text()[-2000:]
    assert "only the safety supervisor may command the robot" in graph.log.text()


def test_a_lockstep_sim_names_a_second_driver_and_a_second_clock(start_graph, probe):
    """Both, within one throttle period, though one node checks both topics: with one throttled
    call site for both, the first topic's warning would hold the second's back for WARN_THROTTLE_S."""
    from rosgraph_msgs.msg import Clock

    from sim2real.nodes.sole_publisher import WARN_THROTTLE_S

    graph = start_graph(robot="panda", lockstep="true", only=["sim_robot"])
    assert wait_for(lambda: "lockstep" in graph.log.text(), 30.0), graph.log.text()[-2000:]
    probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    probe.node.create_publisher(Clock, "/clock", 10)
    warnings = ("2 publishers on /joint_states", "2 publishers on /clock")
    # Discovery decides when the first comes; the second must not wait a throttle period behind it.
    assert wait_for(lambda: any(w in graph.log.text() for w in warnings), 30.0), graph.log.text()[-2000:]
    assert wait_for(lambda: all(w in graph.log.text() for w in warnings), WARN_THROTTLE_S - 1.0), graph.log.text()[
        -2000:
    ]


def test_a_second_writer_on_joint_commands_moves_nothing_and_damps(start_graph, probe):
    """Fault matrix case 2: another publisher of /joint_commands moves nothing (a driver obeying
    it could drive the Panda to its limits while /safety/status says ESTOP): the driver takes the
    supervisor's commands alone, and the supervisor damps while another writer exists."""
    import numpy as np
    from diagnostic_msgs.msg import DiagnosticArray

    from sim2real.core.robot_profile import load_profile

    panda = load_profile("panda")
    start_graph(robot="panda", only=["sim_robot", "safety_supervisor"])
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    status = probe.record(DiagnosticArray, "/safety/status", 10)
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 10)
    assert wait_for(lambda: len(states) > 50 and status, 30.0)
    wild = panda.default_positions.copy()
    wild[1] += 1.0
    rogue = probe.node.create_publisher(JointState, "/joint_commands", qos.COMMAND)
    probe.node.create_timer(0.02, lambda: rogue.publish(JointState(name=panda.joint_names, position=wild.tolist())))

    def tripped():
        values = {kv.key: kv.value for kv in status[-1].status[0].values}
        return status[-1].status[0].message == "DAMPING" and "sole_writer" in values["last_trip"]

    assert wait_for(tripped, 30.0), status[-1].status[0].values  # once the supervisor's discovery sees it

    def refused_writers() -> int:  # the sim's own count, in its diagnostics once a second
        sim = [
            kv.value
            for a in list(diagnostics)
            for s in a.status
            if s.name.startswith("sim_robot")
            for kv in s.values
            if kv.key == "refused_writers"
        ]
        return int(sim[-1]) if sim else 0

    assert wait_for(lambda: refused_writers() > 0, 30.0), "the sim never reported the rogue writer"
    time.sleep(1.0)  # the rogue keeps commanding: nothing moves
    reached = max(float(m.position[1]) for m in list(states)[-300:])
    assert reached < panda.default_positions[1] + 0.2, f"the rogue commands moved joint 2 to {reached:.2f} rad"
    np.testing.assert_array_equal(np.isfinite(states[-1].position), True)
