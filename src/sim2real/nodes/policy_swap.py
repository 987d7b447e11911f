"""Hot-swap the running policy from a script or the command line: `sim2real policy swap FILE`.

The same as ``ros2 param set /policy_runtime policy_path FILE``: one SetParameters call,
whose result carries the runtime's verdict with the reason a model was refused. rclpy
keeps no reason for an accepted parameter, so the report of an accepted swap (sha256,
dry run, largest jump) is read from the runtime's next /diagnostics. Works without a
system ROS (rclpy from PyPI wheels).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters

from sim2real.nodes.trigger_call import command_line_node

DEFAULT_NODE = "/policy_runtime"
# A SetParameters pseudo-parameter naming who asks for the swap in the same request (the
# runtime's audit log); the runtime consumes it.
SWAP_ORIGIN = "swap_origin"
# The report comes with the runtime's next /diagnostics (1 Hz) after the cross-fade (0.2 s on
# the Go2): about 1.2 s at worst on an idle machine, and a loaded one stalls processes for a
# second or more. An answer that never comes costs the caller this wait only.
SWAP_REPORT_WAIT_S = 5.0


def swap_origin() -> str:
    """``cli (user@host, pid N)``: who asks, as the audit log records it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid {os.getuid()}"
    return f"cli ({user}@{socket.gethostname()}, pid {os.getpid()})"


def _last_swap(msg: DiagnosticArray, status_name: str) -> list[str]:
    return [
        kv.value for status in msg.status if status.name == status_name for kv in status.values if kv.key == "last_swap"
    ]


def swap_policy(path: str | Path, node: str = DEFAULT_NODE, timeout: float = 10.0) -> tuple[bool, str]:
    """Ask ``node`` to run the policy at ``path``. Returns (swapped, reason). A relative path is
    made absolute here: the runtime's working directory is not the caller's."""
    text = str(path)
    target = text if Path(text).is_absolute() else str(Path(text).absolute())
    service = f"{node.rstrip('/')}/set_parameters"
    with command_line_node("policy_swap") as (client_node, executor):
        client = client_node.create_client(SetParameters, service)
        reports: list[str] = []
        status_name = f"{node.rstrip('/').rsplit('/', 1)[-1]}: policy"
        client_node.create_subscription(
            DiagnosticArray, "/diagnostics", lambda msg: reports.extend(_last_swap(msg, status_name)), 10
        )
        deadline = time.monotonic() + timeout
        if not client.wait_for_service(timeout_sec=timeout):
            return False, f"no service {service} within {timeout:g} s: is policy_runtime running (node {node})?"
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=target)
        # Who asks, for the runtime's audit log: a pseudo-parameter the runtime consumes.
        origin = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=swap_origin())
        request = SetParameters.Request(
            parameters=[Parameter(name="policy_path", value=value), Parameter(name=SWAP_ORIGIN, value=origin)]
        )
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=max(0.1, deadline - time.monotonic()))
        if not future.done():
            return False, f"{service} gave no answer within {timeout:g} s (the model may still be loading)"
        result = future.result().results[0]
        if not result.successful:
            return False, result.reason
        # rclpy drops the reason of an accepted parameter: the swap's report comes with the
        # runtime's /diagnostics (1 Hz) instead, once it has swapped at a tick. Until then they
        # carry the previous swap's report: only one that names this file answers.
        previous = set(reports)  # a swap to the same file as the last one must not answer with that one
        del reports[:]
        names = (target, str(Path(target).resolve()))
        swapped, refused = tuple(f"{name} sha256" for name in names), tuple(f"refused {name} " for name in names)

        def outcome() -> str | None:
            for report in reversed(reports):
                new = report not in previous
                if new and ((report.startswith(swapped) and "swapped" in report) or report.startswith(refused)):
                    return report
            return None

        until = min(time.monotonic() + SWAP_REPORT_WAIT_S, deadline)
        while outcome() is None and time.monotonic() < until:
            executor.spin_once(timeout_sec=0.05)
        report = outcome()
        if report is None:
            return True, f"accepted {target}: the runtime swaps at its next tick"
        return not report.startswith("refused "), report


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="sim2real policy swap")
    parser.description = (
        "Hot-swap the policy of a running policy_runtime. The runtime checks the file (inside its\n"
        "policy directories, metadata matching the robot profile), dry-runs it on the last second\n"
        "of real inputs, and swaps at a tick boundary with a cross-fade. A refused model changes\n"
        "nothing; the reason is printed. Exit status 0: swapped, 1: refused or no answer."
    )
    parser.epilog = (
        "example:\n  sim2real policy swap policies/go2_walk_v2.onnx\n"
        "  sim2real policy swap runs/walk/policy.onnx --node /robot1/policy_runtime --json"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("file", metavar="FILE", help="ONNX policy file, on the machine that runs policy_runtime")
    parser.add_argument("--node", default=DEFAULT_NODE, help=f"the policy_runtime node (default {DEFAULT_NODE})")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer (default 10)")
    parser.add_argument("--json", action="store_true", help="print {swapped, reason} as JSON")
    return parser


def main_swap(argv: list[str] | None = None) -> int:
    """`sim2real policy swap FILE [--node N] [--timeout S] [--json]`: 0 swapped, 1 refused or unreachable."""
    args = build_parser().parse_args(argv)
    swapped, reason = swap_policy(args.file, args.node, args.timeout)
    if args.json:
        print(json.dumps({"swapped": swapped, "file": args.file, "node": args.node, "reason": reason}))
    else:
        print(f"{'swapped' if swapped else 'refused'}: {reason}")
    return 0 if swapped else 1


if __name__ == "__main__":
    raise SystemExit(main_swap())
