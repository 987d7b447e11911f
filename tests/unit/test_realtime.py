"""Real-time scheduling: what the plan asks each node for, what a process gets, and a refusal
that names the missing privilege and the fix while the process runs on.

The requests are applied in child processes (this test process keeps its own scheduling):
as this machine's user (root here, so SCHED_FIFO and mlockall are granted) and as an
unprivileged user with no rtprio or memlock allowance (refused). The machines that run these
tests run them as root, as CI does."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys

import pytest

from sim2real.core.launch_env import REALTIME_ENV
from sim2real.core.realtime import FIX, ROLE_PRIORITY, RealtimeRequest, RealtimeRequestError, available_cpus
from sim2real.graph.plan import PlanError, make_plan
from sim2real.graph.sysid_recording import make_sysid_plan

POLICY = "policies/go2_walk.onnx"
_PR_CAPBSET_DROP, _CAP_IPC_LOCK, _CAP_SYS_NICE = 24, 14, 23  # linux/prctl.h, linux/capability.h

# Applies the request in SIM2REAL_REALTIME as a node does, then reports what the kernel says.
PROBE = r"""
import json, os, sys
from sim2real.core import realtime
outcome = realtime.apply_encoded(os.environ.get("SIM2REAL_REALTIME"))
locked_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmLck:"))
print(json.dumps({"policy": os.sched_getscheduler(0), "priority": os.sched_getparam(0).sched_priority,
                  "cpus": sorted(os.sched_getaffinity(0)), "locked_kb": locked_kb, "lines": outcome.lines()}))
"""


def _from_a_login_shell() -> None:
    """The scheduling a shell gives a command (run in the child, before exec): `make test` runs
    these tests at idle priority beside the graph tests, and a child would inherit it. Leaving
    SCHED_IDLE takes CAP_SYS_NICE (these tests run as root, as the module says)."""
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _as_a_plain_user() -> None:
    """What a user without limits.conf entries or capabilities has (run in the child, before exec)."""
    _from_a_login_shell()
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 * 1024, 64 * 1024))
    # Out of the bounding set, the two capabilities are gone after exec, even for root.
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (_CAP_SYS_NICE, _CAP_IPC_LOCK):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _child(code: str, request: RealtimeRequest, unprivileged: bool = False) -> tuple[dict, str]:
    """Run ``code`` in a child with ``request`` in its environment: (its last line as JSON, its output)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, REALTIME_ENV: request.encode()},
        preexec_fn=_as_a_plain_user if unprivileged else _from_a_login_shell,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout


def _probe(request: RealtimeRequest, unprivileged: bool = False) -> dict:
    return _child(PROBE, request, unprivileged)[0]


def _request(plan, name: str) -> RealtimeRequest | None:
    text = plan.node(name).environment.get(REALTIME_ENV)
    return None if text is None else RealtimeRequest.decode(text)


def test_the_chain_is_ordered_hardware_supervisor_runtime_estimator_and_monitoring_stays_normal():
    plan = make_plan(robot="go2", policy=POLICY, demo=True, realtime=True)
    priority = {n.name: _request(plan, n.name).priority if _request(plan, n.name) else 0 for n in plan.nodes}
    assert (
        priority["sim_robot"]
        > priority["safety_supervisor"]
        > priority["policy_runtime"]
        > priority["state_estimator"]
        > 0
    )
    assert priority["demo_script"] == priority["failure_collector"] == 0
    for name in ("sim_robot", "safety_supervisor", "policy_runtime", "state_estimator"):
        assert _request(plan, name).lock_memory
    assert all(not n.environment for n in make_plan(robot="go2", policy=POLICY, demo=True).nodes)


def test_hardware_bridges_take_the_hardware_priority():
    for hardware in ("unitree", "ros2_control"):
        plan = make_plan(robot="go2", hardware=hardware, realtime=True)
        bridge = next(n for n in plan.nodes if n.role == "hardware")
        assert _request(plan, bridge.name).priority == ROLE_PRIORITY["hardware"]
    assert not any(n.role == "hardware" for n in make_plan(robot="go2", hardware="topic", realtime=True).nodes)


def test_pinning_puts_the_chain_on_its_cpus_and_everything_else_on_the_rest():
    cpus = available_cpus()
    if len(cpus) < 2:
        pytest.fail("this test needs a computer with 2 CPUs or more")
    chain, rest = cpus[-1:], cpus[:-1]
    plan = make_plan(robot="go2", policy=POLICY, demo=True, realtime=True, realtime_cpus=str(chain[0]))
    assert plan.realtime_cpus == tuple(chain)
    for node in plan.nodes:
        assert list(_request(plan, node.name).cpus) == (chain if node.role in ROLE_PRIORITY else rest), node.name
    # The whole computer for the chain: the others are not pinned at all.
    everything = make_plan(robot="go2", policy=POLICY, demo=True, realtime=True, realtime_cpus=",".join(map(str, cpus)))
    assert not everything.node("failure_collector").environment


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"realtime_cpus": "1"}, ["realtime:=true"]),
        ({"realtime": True, "realtime_cpus": "one"}, ["CPU numbers"]),
        ({"realtime": True, "realtime_cpus": "4096"}, ["no CPU [4096]", "offers"]),
        ({"realtime": "sometimes"}, ["realtime", "true or false"]),
        ({"realtime": True, "lockstep": True}, ["lockstep", "starve"]),
    ],
)
def test_bad_realtime_arguments_name_the_argument_and_the_fix(arguments, words):
    with pytest.raises(PlanError) as error:
        make_plan(robot="go2", **arguments)
    for word in words:
        assert word in str(error.value)


def test_a_sysid_recording_schedules_the_logger_as_the_chain_s_control_part(tmp_path):
    """The logger streams the excitation in the policy's place, and the supervisor checks each
    command's age (tick_overrun): at normal priority a loaded computer would make it trip."""
    plan = make_sysid_plan(robot="panda", bag=str(tmp_path / "bag"), realtime="true")
    assert _request(plan, "sim_robot").priority == ROLE_PRIORITY["hardware"]
    assert _request(plan, "safety_supervisor").priority == ROLE_PRIORITY["safety"]
    assert _request(plan, "sysid_logger").priority == ROLE_PRIORITY["control"]
    assert not make_sysid_plan(robot="panda", bag=str(tmp_path / "bag")).node("sysid_logger").environment


def test_a_granted_request_is_what_the_kernel_then_reports():
    cpu = available_cpus()[-1]
    got = _probe(RealtimeRequest(priority=60, cpus=(cpu,), lock_memory=True))
    assert got["policy"] == os.SCHED_FIFO and got["priority"] == 60
    assert got["cpus"] == [cpu]
    assert got["locked_kb"] > 0
    assert got["lines"] == [f"real-time: CPUs [{cpu}], SCHED_FIFO priority 60, memory locked"]


def test_a_worker_thread_steps_one_priority_below_its_real_time_process():
    code = PROBE.replace(
        "outcome = realtime.apply_encoded", "import threading\noutcome = realtime.apply_encoded"
    ).replace(
        "print(json.dumps({",
        "got = []\n"
        "def worker():\n    realtime.below_own_priority(); got.append(os.sched_getparam(0).sched_priority)\n"
        "t = threading.Thread(target=worker); t.start(); t.join()\nprint(json.dumps({'worker': got[0], ",
    )
    got, _ = _child(code, RealtimeRequest(priority=60))
    assert got["priority"] == 60 and got["worker"] == 59


def test_a_refused_request_names_what_is_missing_and_the_fix_and_the_process_runs_on():
    got = _probe(RealtimeRequest(priority=70, lock_memory=True), unprivileged=True)
    assert got["policy"] == os.SCHED_OTHER and got["locked_kb"] == 0
    [line] = got["lines"]
    assert line.startswith("warning: real-time: could not get SCHED_FIFO priority 70")
    assert "rtprio limit is 0" in line and "no CAP_SYS_NICE" in line
    assert "memlock limit is 64 KiB" in line and "no CAP_IPC_LOCK" in line
    assert "runs on without it" in line and FIX in line
    assert "limits.d" in FIX and "--cap-add=SYS_NICE" in FIX and "--ulimit rtprio" in FIX


def test_an_unreadable_request_is_a_configuration_error_that_says_where_it_comes_from():
    for text in ("fifo 80", '{"priority": 120}', '{"priority": 1, "nice": 3}', "[1]"):
        with pytest.raises(RealtimeRequestError) as error:
            RealtimeRequest.decode(text)
        assert "realtime:=true" in str(error.value)
    assert RealtimeRequest.decode(RealtimeRequest(50, (1,), True).encode()) == RealtimeRequest(50, (1,), True)


def test_sim2real_up_and_sysid_record_take_the_realtime_options(capsys):
    from sim2real.cli.main import main

    assert main(["up", "--robot", "go2", "--realtime", "--print-plan"]) == 0
    plan = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in plan["nodes"]}
    assert json.loads(nodes["safety_supervisor"]["environment"][REALTIME_ENV])["priority"] == ROLE_PRIORITY["safety"]
    with pytest.raises(SystemExit):
        main(["sysid", "record", "--help"])
    assert "--realtime-cpus" in capsys.readouterr().out


# A node run by lifecycle.run as every node of the graph is: what its __init__ and its start()
# run at, and the scheduling of every thread once it spins.
NODE = r"""
import json, os, threading, time
from rclpy.node import Node
from sim2real.nodes import lifecycle

class Probe(Node):
    def __init__(self):
        super().__init__("realtime_probe")
        self.built_at = os.sched_getscheduler(0)
        self.started_at = None
        self.release = threading.Event()
        self.worker = threading.Thread(target=self.release.wait, daemon=True)  # started in __init__
        self.worker.start()

    def start(self):
        self.started_at = os.sched_getscheduler(0)

seen = {}

def until(node):
    threads = {}
    for tid in map(int, os.listdir("/proc/self/task")):
        try:
            threads[tid] = os.sched_getscheduler(tid)
        except ProcessLookupError:
            pass
    seen.update(built=node.built_at, started=node.started_at, threads=sorted(set(threads.values())))
    node.release.set()
    return True

code = lifecycle.run("realtime_probe", Probe, until=until)
print(json.dumps({"code": code, **seen}), flush=True)
lifecycle.exit_process(code)  # as a node ends, not through the interpreter's teardown of DDS
"""


@pytest.mark.ros
def test_a_node_is_built_at_normal_priority_and_runs_at_its_request():
    """The start-up (imports, a model load, a standing simulation) must not run at SCHED_FIFO:
    seconds of it would use up a CPU's real-time share and the kernel would stop every real-time
    task there for 50 ms. Once built, every thread it has (those its __init__ started too) runs
    at the request."""
    got, output = _child(NODE, RealtimeRequest(priority=60, lock_memory=True))
    assert got["code"] == 0
    assert got["built"] == os.SCHED_OTHER
    assert got["started"] == os.SCHED_FIFO
    assert got["threads"] == [os.SCHED_FIFO]
    assert "real-time: SCHED_FIFO priority 60, memory locked" in output
