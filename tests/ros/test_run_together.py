"""lifecycle.run_together, the way control_chain runs its members: in a child process, as a node
process runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

CHAIN = r"""
import sys
from rclpy.node import Node
from sim2real.nodes import lifecycle

class First(Node):  # the supervisor's place: created first, stopped first
    def __init__(self):
        super().__init__("first_member")
    def stop(self):
        print("stop first", flush=True)
    def destroy_node(self):
        print("destroy first", flush=True)
        super().destroy_node()

class Second(Node):
    def __init__(self):
        super().__init__("second_member")
    def stop(self):
        print("stop second", flush=True)
        if sys.argv[1] == "raise":
            raise RuntimeError("second member's stop failed")
    def destroy_node(self):
        print("destroy second", flush=True)
        super().destroy_node()

code = lifecycle.run_together("chain", [First, Second], until=lambda nodes: True)
print(f"code {code}", flush=True)
lifecycle.exit_process(code)
"""


def _run(mode: str) -> tuple[int, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", CHAIN, mode], capture_output=True, text=True, timeout=60, check=False
    )
    return result.returncode, result.stdout.splitlines()


def test_members_stop_in_creation_order_and_are_destroyed_in_reverse():
    code, lines = _run("clean")
    assert code == 0
    assert [line for line in lines if line.startswith(("stop ", "destroy ", "code "))] == [
        "stop first",
        "stop second",
        "destroy second",
        "destroy first",
        "code 0",
    ]


def test_a_member_whose_stop_raises_leaves_the_others_stopping_and_the_exit_code_says_so():
    code, lines = _run("raise")
    assert code == 1  # lifecycle.FAULT_EXIT
    assert "[chain] error in stop() of a node:" in lines
    assert any("second member's stop failed" in line for line in lines)
    events = [line for line in lines if line.startswith(("stop ", "destroy "))]
    assert events == ["stop first", "stop second", "destroy second", "destroy first"]
