"""Run a `sim2real` command that starts a node graph, as the tests do, without leaving strays.

subprocess.run's timeout kills only the command, with SIGKILL: its nodes were left running
in the test session's ROS_DOMAIN_ID, and every later graph test shared its topics with them
(a timed-out lockstep demo and its two reruns then all timed out). Here the command runs in a
session of its own; on timeout the whole session gets Ctrl-C, then SIGKILL, and the test
fails with the end of what the command printed, which says where it stood.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SIM2REAL = Path(sys.executable).parent / "sim2real"
TAIL_CHARS = 4000


def run_cli(args: list[str], timeout: float, **popen_kwargs) -> subprocess.CompletedProcess:
    """``sim2real *args``; output captured as text, like subprocess.run(capture_output=True)."""
    command = [str(SIM2REAL), *args]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen_kwargs
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _stop_session(process)
        pytest.fail(
            f"`sim2real {' '.join(args)}` ran past {timeout:.0f} s; the end of its output:\n"
            f"--- stdout ---\n{out[-TAIL_CHARS:]}\n--- stderr ---\n{err[-TAIL_CHARS:]}"
        )
    except BaseException:  # Ctrl-C, pytest-timeout: its own session does not get the terminal's signals
        _stop_session(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _stop_session(process: subprocess.Popen) -> tuple[str, str]:
    for signum, grace in ((signal.SIGINT, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            return process.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    out, err = process.communicate()
    return out, err


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def process_alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # the name in () may hold spaces
    except FileNotFoundError:
        return False
