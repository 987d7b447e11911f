"""Running one node process: init, spin, and a clean stop on Ctrl-C or SIGTERM.

rclpy's own signal handler shuts the context down from under threads that are still
publishing; here SIGINT/SIGTERM become KeyboardInterrupt in the main thread instead,
so a node stops its worker threads first and then leaves ROS. A configuration error
(bad profile, bad parameter) prints one clear line and exits with status 2.
"""
from __future__ import annotations

import signal
from typing import Any, Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from sim2real.core.robot_profile import ProfileError

CONFIG_ERROR_EXIT = 2


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run(name: str, make_node: Callable[[], Node], args=None,
        until: Callable[[Node], bool] | None = None, executor: Callable[[], Any] | None = None) -> int:
    """Create the node and spin it until shutdown, or until ``until(node)`` is true.

    A node with worker threads exposes ``start()`` and ``stop()``; they are called here.
    ``executor``: a factory for the executor to spin (default: rclpy's global one).
    """
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, _interrupt)
    node = None
    try:
        node = make_node()
        if hasattr(node, "start"):
            node.start()
        spin = (lambda: rclpy.spin_once(node, timeout_sec=0.1)) if executor is None else None
        if executor is not None:
            own = executor()
            own.add_node(node)
            spin = lambda: own.spin_once(timeout_sec=0.1)  # noqa: E731
        while rclpy.ok() and not (until and until(node)):
            spin()
    except (ProfileError, ValueError) as exc:
        print(f"[{name}] error: {exc}", flush=True)
        return CONFIG_ERROR_EXIT
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            if hasattr(node, "stop"):
                node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
