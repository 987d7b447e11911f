"""Running one node process: init, spin, and a clean stop on Ctrl-C or SIGTERM.

rclpy's own signal handler shuts the context down from under threads that are still
publishing; here SIGINT/SIGTERM only ask the spin loop to end (within ``SPIN_TIMEOUT_S``),
so a node stops its worker threads first and then leaves ROS. (Raising KeyboardInterrupt
from the handler instead was seen to land inside rclpy's C++ take of a message and surface
as a RuntimeError traceback at every shutdown.) A configuration error (bad profile, bad
parameter) prints one clear line and exits with status 2.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import signal
import sys
import threading
import traceback
from typing import Any, Callable, NoReturn, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from sim2real.core import realtime
from sim2real.core.launch_env import LAUNCHER_PID_ENV, REALTIME_ENV
from sim2real.core.robot_profile import ProfileError
from sim2real.nodes.dds_transport import use_graph_transport

CONFIG_ERROR_EXIT = 2
FAULT_EXIT = 1
SPIN_TIMEOUT_S = 0.1  # a stop request is seen within this
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class NodeFault:
    """A failure in a node's own worker thread, which must end the process (``node.fault``)."""

    def __init__(self, what: str, exc: BaseException):
        self.what = what
        self.trace = "".join(traceback.format_exception(exc))


def stop_with_launcher(stop: threading.Event) -> None:
    """A node started by ``sim2real up`` stops when its launcher dies, however it dies.

    A launcher killed with SIGKILL (the OOM killer, a test's timeout, ``kill -9``) would
    otherwise leave its nodes running: a supervisor and a sim nobody can stop from the terminal,
    and a second ``up`` in the same ROS_DOMAIN_ID would have two supervisors and two drivers on
    one set of topics. The kernel sends SIGTERM (the node's clean stop) when the parent dies."""
    # Popped: a process this node starts is not the launcher's child.
    launcher = os.environ.pop(LAUNCHER_PID_ENV, None)
    if not launcher or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if (
        libc.prctl(
            _PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
        != 0
    ):
        print(
            f"warning: prctl(PR_SET_PDEATHSIG) failed ({os.strerror(ctypes.get_errno())}): this node will "
            "not stop by itself if its launcher is killed",
            flush=True,
        )
    if os.getppid() != int(launcher):  # it died before the prctl: nobody will send the signal
        print("the launcher (sim2real up) is gone: stopping", flush=True)
        stop.set()


def settle_garbage_collector() -> None:
    """Exempt everything built so far (imported modules, the node) from garbage collection.

    A node allocates a little per message; every so often Python then runs a full collection
    that walks every tracked object, and after importing rclpy, numpy, onnxruntime and friends
    that walk took 35-145 ms (measured with gc.callbacks) -- longer than the supervisor's
    deadlines. Frozen objects are never walked again, so later collections only see what the
    node allocates while running."""
    gc.collect()
    gc.freeze()


def events_executor(node: Node | None = None, context=None):
    """rclpy's EventsExecutor: it dispatches each message or timer without rebuilding a wait set,
    a fraction of the SingleThreadedExecutor's CPU per wake-up (benchmarks/graph_cpu.py)."""
    from rclpy.experimental import EventsExecutor

    return EventsExecutor(context=context)


def events_executor_unless_lockstep(node: Node):
    """The EventsExecutor in real time; in lockstep the SingleThreadedExecutor, whose handling of
    sim-time timers and message order the lockstep determinism tests hold to."""
    return SingleThreadedExecutor() if node.get_parameter("use_sim_time").value else events_executor()


def exit_process(code: int) -> NoReturn:
    """End a node's process with ``code`` once :func:`run` has shut it down in order. Not through
    the interpreter's finalization: that tears down DDS and ONNX Runtime objects in no set order
    while their threads still run, and once turned a clean exit (code 2, after a refused
    policy) into SIGSEGV, losing the code a launcher reports. Everything that must outlive
    the node (bags, failure bundles, the audit log) is closed by then."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the launcher has gone (a broken pipe) or closed it: exit all the same
            pass
    os._exit(code)


def _destroy_half_built(node: Node) -> None:
    """Destroy what exists of a node whose ``__init__`` raised: its rcl node and the entities it
    created before the error. The base class's destroy only: a subclass's would stop workers
    that were never started."""
    try:
        Node.destroy_node(node)
    except AttributeError:  # the base class's __init__ never finished: no rcl node was made
        pass


def _realtime_request(name: str) -> realtime.RealtimeRequest | None:
    """The scheduling the launcher asked for (realtime:=true); None when the request cannot be
    read (said why). Popped: a process this node starts does not apply it again (it inherits the
    scheduling as it is)."""
    text = os.environ.pop(REALTIME_ENV, None)
    try:
        return realtime.RealtimeRequest.decode(text) if text else realtime.RealtimeRequest()
    except realtime.RealtimeRequestError as exc:
        print(f"[{name}] error: environment variable {REALTIME_ENV}: {exc}", flush=True)
        return None


def _apply_realtime(name: str, request: realtime.RealtimeRequest) -> None:
    """The request applied once the node is built, said line by line. Its start-up (model
    loading, the sysid logger's standing simulation) stays at normal priority: a second of CPU at
    SCHED_FIFO would use up that CPU's real-time share, and the kernel would then stop every
    real-time task on it for up to 50 ms, past the supervisor's sensing deadline. Applied to
    every thread the process has (DDS, the executor, ONNX Runtime's pool); the threads started
    later inherit it."""
    for line in realtime.apply(request).lines():
        print(f"[{name}] {line}", flush=True)


def _built(name: str, node_class: type[Node], member: bool = False) -> Node | None:
    """The node, or None when it refused its configuration (said why, its DDS entities destroyed).

    Held before __init__ runs: a node that refuses its configuration has its DDS participant
    and entities already, and must be destroyed like any other. Left to the interpreter's
    exit, they were torn down while DDS threads still delivered to them (seen: SIGSEGV)."""
    node = node_class.__new__(node_class)
    try:
        node.__init__()
    except (ProfileError, ValueError) as exc:
        # Only here: a ValueError raised later, in a callback, is a bug to show with its
        # traceback, not a configuration error.
        where = f"{node_class.__name__}: " if member else ""  # which node of a shared process refused
        print(f"[{name}] error: {where}{exc}", flush=True)
        _destroy_half_built(node)
        return None
    except BaseException:
        _destroy_half_built(node)
        raise
    return node


def run(
    name: str,
    node_class: type[Node],
    args=None,
    until: Callable[[Node], bool] | None = None,
    executor: Callable[[Node], Any] | None = None,
) -> int:
    """Create the node and spin it until shutdown, or until ``until(node)`` is true.

    A node with worker threads exposes ``start()`` and ``stop()``; they are called here.
    ``executor``: a factory ``executor(node)`` for the executor to spin (default: rclpy's
    SingleThreadedExecutor).
    """
    return run_together(
        name,
        (node_class,),
        args,
        until=None if until is None else lambda nodes: until(nodes[0]),
        executor=None if executor is None else lambda nodes: executor(nodes[0]),
    )


def run_together(
    name: str,
    node_classes: Sequence[type[Node]],
    args=None,
    until: Callable[[list[Node]], bool] | None = None,
    executor: Callable[[list[Node]], Any] | None = None,
) -> int:
    """Create the nodes, in order, in this one process and spin them on one executor until
    shutdown, until ``until(nodes)`` is true, or until one of them reports a fault (which ends
    them all: one process, one fate). Each node keeps its own name, parameters, topics and
    services. Once the executor has stopped, each node's ``stop()`` runs in the order of creation,
    so the first one (the supervisor of a composed control chain) sends its holding command
    before any other node's stop can delay it; then they are destroyed in the reverse order.
    """
    # A crash in native code (DDS, ONNX Runtime, the physics) prints every thread's Python stack
    # to the node's output before the process dies: what the launcher's bare "-11" cannot tell.
    faulthandler.enable(all_threads=True)
    request = _realtime_request(name)
    if request is None:
        return CONFIG_ERROR_EXIT
    use_graph_transport()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop_with_launcher(stop)
    nodes: list[Node] = []
    spinner = None
    failed = None
    try:
        for node_class in node_classes:
            node = _built(name, node_class, member=len(node_classes) > 1)
            if node is None:
                return CONFIG_ERROR_EXIT
            nodes.append(node)
        spinner = executor(nodes) if executor is not None else SingleThreadedExecutor()
        for node in nodes:
            spinner.add_node(node)
        settle_garbage_collector()
        _apply_realtime(name, request)
        for node in nodes:
            if hasattr(node, "start"):
                node.start()
        _spin(spinner, nodes, stop, until)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        failed = _first_fault(nodes)
        clean = _shut_down(name, spinner, nodes)
    if failed is None and not clean:
        return FAULT_EXIT
    if failed is not None:
        node_name, fault = failed
        if len(nodes) == 1:
            print(f"[{name}] error: {fault.what}; the node stops (exit code {FAULT_EXIT}):\n{fault.trace}", flush=True)
        else:
            print(
                f"[{name}] error: {node_name}: {fault.what}; every node of this process stops (exit code "
                f"{FAULT_EXIT}):\n{fault.trace}",
                flush=True,
            )
        return FAULT_EXIT
    return 0


def _spin(spinner, nodes: list[Node], stop: threading.Event, until) -> None:
    """Spin until shutdown, a stop request, ``until(nodes)`` or a node's fault."""
    while rclpy.ok() and not stop.is_set() and not (until and until(nodes)) and _first_fault(nodes) is None:
        spinner.spin_once(timeout_sec=SPIN_TIMEOUT_S)


def _first_fault(nodes: list[Node]) -> tuple[str, NodeFault] | None:
    """The first node's name and fault among ``nodes`` that reported one (``node.fault``)."""
    for node in nodes:
        fault = getattr(node, "fault", None)
        if fault is not None:
            return node.get_name(), fault
    return None


def _shut_down(name: str, spinner, nodes: list[Node]) -> bool:
    """The executor; each node's stop() in the order of creation; each node destroyed in the
    reverse order; then ROS. A node whose stop or destroy raises is reported and the others still
    stop (the supervisor's holding command must not depend on another node's clean exit).
    Returns False if one raised."""
    clean = True
    if spinner is not None:
        spinner.shutdown()
    for step, ordered in (("stop", nodes), ("destroy_node", list(reversed(nodes)))):
        for node in ordered:
            if not hasattr(node, step):
                continue
            try:
                getattr(node, step)()
            except Exception:
                clean = False
                print(f"[{name}] error in {step}() of a node:\n{traceback.format_exc()}", flush=True)
    rclpy.try_shutdown()
    return clean
