"""Running one node process: init, spin, and a clean stop on Ctrl-C or SIGTERM.

rclpy's own signal handler shuts the context down from under threads that are still
publishing; here SIGINT/SIGTERM only ask the spin loop to end (within ``SPIN_TIMEOUT_S``),
so a node stops its worker threads first and then leaves ROS. (Raising KeyboardInterrupt
from the handler instead was seen to land inside rclpy's C++ take of a message and surface
as a RuntimeError traceback at every shutdown.) A configuration error (bad profile, bad
parameter) prints one clear line and exits with status 2.
"""
from __future__ import annotations

import gc
import signal
import threading
from typing import Any, Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from sim2real.core.robot_profile import ProfileError

CONFIG_ERROR_EXIT = 2
SPIN_TIMEOUT_S = 0.1  # a stop request is seen within this


def settle_garbage_collector() -> None:
    """Exempt everything built so far (imported modules, the node) from garbage collection.

    A node allocates a little per message; every so often Python then runs a full collection
    that walks every tracked object, and after importing rclpy, numpy, onnxruntime and friends
    that walk took 35-145 ms (measured with gc.callbacks) -- longer than the supervisor's
    deadlines. Frozen objects are never walked again, so later collections only see what the
    node allocates while running."""
    gc.collect()
    gc.freeze()


def run(name: str, make_node: Callable[[], Node], args=None,
        until: Callable[[Node], bool] | None = None, executor: Callable[[Node], Any] | None = None) -> int:
    """Create the node and spin it until shutdown, or until ``until(node)`` is true.

    A node with worker threads exposes ``start()`` and ``stop()``; they are called here.
    ``executor``: a factory ``executor(node)`` for the executor to spin (default: rclpy's
    SingleThreadedExecutor).
    """
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    node = spinner = None
    try:
        try:
            node = make_node()
        except (ProfileError, ValueError) as exc:
            # Only here: a ValueError raised later, in a callback, is a bug to show with its
            # traceback, not a configuration error.
            print(f"[{name}] error: {exc}", flush=True)
            return CONFIG_ERROR_EXIT
        spinner = executor(node) if executor is not None else SingleThreadedExecutor()
        spinner.add_node(node)
        settle_garbage_collector()
        if hasattr(node, "start"):
            node.start()
        while rclpy.ok() and not stop.is_set() and not (until and until(node)):
            spinner.spin_once(timeout_sec=SPIN_TIMEOUT_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if spinner is not None:
            spinner.shutdown()
        if node is not None:
            if hasattr(node, "stop"):
                node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
