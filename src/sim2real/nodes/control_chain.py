"""control_chain: the control chain's nodes in one process, on one executor (``composed:=true``).

The safety supervisor, the state estimator and the policy runtime, each the same node class
with its own name, parameters, topics and services as in its own process, created in this
order and spun by one executor. What one process saves on a busy robot computer: an
interpreter, a DDS participant's threads, an executor and the readers of the 500 Hz streams
per node (the polled ones are shared, nodes/polled.py): the Go2 graph then uses about three
quarters of the separate processes' CPU (benchmarks/graph_cpu.py, docs/results.md).

What it gives up: the supervisor no longer outlives a crashed runtime in its own process. The
last line is the driver's own command timeout (sim_robot, unitree_bridge, a real driver's):
the process's death, however it dies, silences /joint_commands and the driver damps. A fault
in one node (a worker thread's, an exception in a callback) ends the whole process the same
way, never a chain with a silent member.

Executor: rclpy's EventsExecutor in real time (what the runtime and the estimator use alone; the
supervisor alone spins a SingleThreadedExecutor), the SingleThreadedExecutor in lockstep. The
runtime's ``executor`` parameter does not apply here. Real-time scheduling: the launcher gives
the process the highest priority of its members' roles (the supervisor's), which every thread
of the process shares (the runtime's model loader one below it).

    ros2 run sim2real control_chain safety_supervisor state_estimator policy_runtime \\
        --ros-args --params-file chain.yaml     # keys: /safety_supervisor, /policy_runtime, ...
"""

from __future__ import annotations

import sys
from typing import NoReturn

from rclpy.executors import SingleThreadedExecutor
from rclpy.utilities import remove_ros_args

from sim2real.nodes import lifecycle
from sim2real.nodes.policy_runtime import PolicyRuntimeNode
from sim2real.nodes.safety_supervisor import SafetySupervisorNode
from sim2real.nodes.state_estimator import StateEstimatorNode


class ChainedSafetySupervisor(SafetySupervisorNode):
    """The supervisor spun by the EventsExecutor: it takes policy commands without their message
    info, which that executor cannot hand over (SafetySupervisorNode.RECEIVES_MESSAGE_INFO)."""

    RECEIVES_MESSAGE_INFO = False


PROCESS_NAME = "control_chain"
# The members a chain may hold, in the order they are created (the supervisor first: its stop,
# the holding command to the driver, runs before the others' stops). graph.plan.COMPOSABLE names
# the same nodes for the plan (a test holds the two to each other).
MEMBERS = {
    "safety_supervisor": ChainedSafetySupervisor,
    "state_estimator": StateEstimatorNode,
    "policy_runtime": PolicyRuntimeNode,
}
USAGE = f"usage: control_chain MEMBER [MEMBER ...] --ros-args --params-file FILE; members: {', '.join(MEMBERS)}"


def chain_members(argv: list[str]) -> list[str]:
    """The member names on the command line (before ``--ros-args``), in creation order.
    Raises ValueError that names the unknown ones, or an empty chain."""
    names = remove_ros_args(argv)[1:]
    unknown = [name for name in names if name not in MEMBERS]
    if unknown or not names:
        raise ValueError(f"{'unknown members ' + str(unknown) if unknown else 'no members'}. {USAGE}")
    if len(set(names)) != len(names):
        raise ValueError(f"a member named twice in {names}. {USAGE}")
    return [name for name in MEMBERS if name in names]


def chain_executor(nodes):
    """EventsExecutor in real time, the SingleThreadedExecutor in lockstep (sim time), whose
    handling of sim-time timers and message order the lockstep tests hold to."""
    if any(node.get_parameter("use_sim_time").value for node in nodes):
        return SingleThreadedExecutor()
    return lifecycle.events_executor()


def main(args=None) -> NoReturn:
    argv = sys.argv if args is None else args
    try:
        names = chain_members(argv)
    except ValueError as exc:
        print(f"[{PROCESS_NAME}] error: {exc}", flush=True)
        lifecycle.exit_process(lifecycle.CONFIG_ERROR_EXIT)
    classes = [MEMBERS[name] for name in names]
    lifecycle.exit_process(lifecycle.run_together(PROCESS_NAME, classes, args, executor=chain_executor))


if __name__ == "__main__":
    main()
