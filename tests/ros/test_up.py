"""`sim2real up` as the process tree a robot computer runs: a node that exits is reported and
the others run on (as under `ros2 launch`); SIGTERM (kill, a systemd stop) stops every node."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_runs import SIM2REAL, child_pids, process_alive, run_cli
from tests.ros.conftest import wait_for

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]


def survivor(pid: int) -> str:
    """What a process that outlived its launcher is and where it waits (Linux /proc)."""
    proc = Path(f"/proc/{pid}")
    try:
        command = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        status = [
            line
            for line in proc.joinpath("status").read_text().splitlines()
            if line.startswith(("State", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigCgt"))
        ]
        return f"{pid} {command!r} wchan={proc.joinpath('wchan').read_text()} {status}"
    except (FileNotFoundError, ProcessLookupError):
        return f"{pid} (gone)"


def test_a_node_that_exits_leaves_the_others_running_and_sigterm_stops_them_all(tmp_path):
    # A policy for another robot: policy_runtime refuses it and exits; the supervisor must stay.
    up = subprocess.Popen(
        [
            str(SIM2REAL),
            "up",
            "--robot",
            "go2",
            "--policy",
            str(ROOT / "policies" / "panda_reach.onnx"),
            "--no-failure-collector",
            "--estimator",
            "false",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert wait_for(lambda: len(child_pids(up.pid)) == 3, 30.0), "the three nodes never started"
        nodes = child_pids(up.pid)
        assert wait_for(lambda: sum(process_alive(pid) for pid in nodes) == 2, 30.0), "policy_runtime did not exit"
        time.sleep(2.0)
        assert up.poll() is None and sum(process_alive(pid) for pid in nodes) == 2, (
            "the graph went down with the runtime"
        )
        up.send_signal(signal.SIGTERM)
        out, err = up.communicate(timeout=30.0)
    finally:
        if up.poll() is None:
            up.kill()
    assert not any(process_alive(pid) for pid in nodes), "SIGTERM left nodes running"
    assert "policy_runtime exited (code 2); the other nodes run on" in err
    assert up.returncode == 1 and "node(s) exited: {'policy_runtime': 2}" in err


def test_nodes_stop_when_up_is_killed_outright(tmp_path, probe):
    # SIGKILL (the OOM killer, kill -9) gives `up` no chance to stop its nodes: the kernel must.
    up = subprocess.Popen(
        [str(SIM2REAL), "up", "--robot", "panda", "--no-failure-collector"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: len(child_pids(up.pid)) == 2, 30.0), "the two nodes never started"
        nodes = child_pids(up.pid)
        # Past the nodes' start-up, where the kernel is told to signal them: a node makes its
        # publishers after that (lifecycle.run).
        assert wait_for(
            lambda: (
                probe.node.count_publishers("/joint_states") >= 1
                and probe.node.count_publishers("/joint_commands") >= 1
            ),
            30.0,
        ), "the nodes never came up"
        up.kill()
        up.wait()
        assert wait_for(lambda: not any(process_alive(pid) for pid in nodes), 15.0), (
            f"nodes outlived their launcher: {[survivor(pid) for pid in nodes if process_alive(pid)]}"
        )
    finally:
        try:
            os.killpg(up.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_up_with_the_demo_operator_ends_when_its_script_does(tmp_path):
    result = run_cli(
        ["up", "--robot", "panda", "--demo", "--lockstep", "--no-failure-collector"], timeout=240, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pose_commander finished its script: stopping the graph" in result.stdout


def test_up_with_the_demo_operator_stops_when_a_node_it_needs_exits(tmp_path):
    # A policy for another robot: policy_runtime exits at start, and the demo cannot play.
    result = run_cli(
        [
            "up",
            "--robot",
            "go2",
            "--demo",
            "--policy",
            str(ROOT / "policies" / "panda_reach.onnx"),
            "--no-failure-collector",
            "--estimator",
            "false",
        ],
        timeout=120,
        cwd=tmp_path,
    )
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 1, output
    assert "policy_runtime exited (code 2): the demo cannot go on; stopping the graph" in result.stderr, output
    assert "node(s) exited: {'policy_runtime': 2}" in result.stderr, output


def test_a_demo_node_stopped_from_outside_fails_the_demo(tmp_path, probe):
    # A clean stop (exit 0) of the sim is no demo either: `up --demo` must not report success.
    up = subprocess.Popen(
        [str(SIM2REAL), "up", "--robot", "panda", "--demo", "--no-failure-collector"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: len(child_pids(up.pid)) == 3, 30.0), "the three nodes never started"
        sim = next(pid for pid in child_pids(up.pid) if b"sim_robot" in Path(f"/proc/{pid}/cmdline").read_bytes())
        # Once its SIGTERM handler is in (lifecycle.run installs it before the node publishes):
        # before that the signal kills it with -15, not the clean stop this test is about.
        assert wait_for(lambda: probe.node.count_publishers("/joint_states") >= 1, 30.0), "sim_robot never came up"
        os.kill(sim, signal.SIGTERM)
        out, err = up.communicate(timeout=60.0)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
    assert up.returncode == 1, out[-2000:] + err[-2000:]
    # The nodes' own output (a crash's stacks among it) is in ``out``.
    assert "sim_robot exited (code 0): the demo cannot go on; stopping the graph" in err, out[-6000:] + err[-2000:]
    assert "error: the demo stopped before pose_commander finished its script" in err


def test_a_demo_that_loses_its_robot_driver_writes_one_failure_bundle_before_it_ends(tmp_path, probe):
    """kill -9 of the simulated robot: the supervisor damps on the silence, and the demo keeps
    the rest of the graph up long enough for the failure collector to write that bundle."""
    from diagnostic_msgs.msg import DiagnosticArray

    from sim2real.core.failure_bundle import list_bundles

    out = tmp_path / "bundles"
    up = subprocess.Popen(
        [str(SIM2REAL), "up", "--robot", "panda", "--demo", "--failures-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: len(child_pids(up.pid)) == 4, 30.0), "the four nodes never started"
        sim = next(pid for pid in child_pids(up.pid) if b"sim_robot" in Path(f"/proc/{pid}/cmdline").read_bytes())
        assert wait_for(
            lambda: (
                probe.node.count_publishers("/joint_states") >= 1 and probe.node.count_subscribers("/joint_states") >= 3
            ),
            30.0,
        ), "the graph never came up"
        # The collector has the robot's sensing in its buffers (its own count says so), and a
        # few seconds of it.
        diagnostics = probe.record(DiagnosticArray, "/diagnostics", 10)
        assert wait_for(
            lambda: any(
                kv.key == "received/joint_states" and int(kv.value) > 0
                for array in list(diagnostics)
                for status in array.status
                if status.name.startswith("failure_collector")
                for kv in status.values
            ),
            30.0,
        ), "the failure collector never received /joint_states"
        time.sleep(3.0)
        killed_ns = time.time_ns()
        os.kill(sim, signal.SIGKILL)
        out_text, err = up.communicate(timeout=60.0)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
    assert up.returncode == 1, out_text[-2000:] + err[-2000:]
    assert "sim_robot exited (code -9): the demo cannot go on; stopping the graph in" in err
    # Exactly one bundle holds the robot's silence after the kill. A loaded machine may add a
    # bundle of its own before it (a late policy tick the supervisor held on, or a /joint_states
    # gap over the 50 ms deadline, seen once in CI): that one is no loss.
    bundles = list_bundles(out)
    silent = [
        b
        for b in bundles
        if int(b.info["time_ns"]) >= killed_ns and any("/joint_states" in t["reason"] for t in b.info["triggers"])
    ]
    assert len(silent) == 1, [(b.name, [t["reason"] for t in b.info["triggers"]]) for b in bundles]
    kinds = {t["kind"] for t in silent[0].info["triggers"]}
    assert kinds & {"supervisor_damping", "stale_sensor"}, kinds
