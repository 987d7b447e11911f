"""Run a node plan as OS processes: what `sim2real up` does without `ros2 launch`.

One process per node, like `ros2 launch`, so sim and launch behave the same: a node that
crashes does not take the others down (the supervisor outlives a crashed policy runtime), and
PyBullet, ONNX inference and the supervisor do not share one GIL on a 2-core robot computer.
With ``composed:=true`` the control chain's nodes share one process (BringupPlan.processes()),
and the driver's command timeout stands in for the supervisor when that process dies. Parameters go through a ROS 2 params file, as
launch_ros passes them, so types arrive exactly as declared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

import yaml

from sim2real.core.launch_env import LAUNCHER_PID_ENV, REALTIME_ENV
from sim2real.core.realtime import FIX, ROLE_PRIORITY, privileges
from sim2real.graph.plan import BringupPlan, ProcessSpec

NODE_PACKAGE = "sim2real.nodes"


def process_command(process: ProcessSpec, params_file: Path) -> list[str]:
    """The command line of one process of the plan. A node alone is renamed to its plan name; the
    members of a shared process keep their own names (a rename would apply to all of them), take
    their parameters from the file, keyed by name, and their remappings scoped to themselves."""
    command = [sys.executable, "-m", f"{NODE_PACKAGE}.{process.executable}", *process.arguments, "--ros-args"]
    if not process.composed:
        command += ["-r", f"__node:={process.name}"]
    command += ["--params-file", str(params_file)]
    for source, target in process.remappings:
        command += ["-r", f"{source}:={target}"]
    return command


def realtime_summary(plan: BringupPlan) -> str:
    """One line before a real-time graph starts: what this user may get, and who asks for what."""
    chain = [(p.name, ROLE_PRIORITY[p.role]) for p in plan.processes() if p.role in ROLE_PRIORITY]
    asks = " > ".join(f"{name} {priority}" for name, priority in sorted(chain, key=lambda c: -c[1]))
    where = f" on CPUs {list(plan.realtime_cpus)}" if plan.realtime_cpus else ""
    have = privileges()
    highest = max((priority for _, priority in chain), default=0)
    ok = have.max_priority() >= highest and have.may_lock_memory()
    return f"real-time: SCHED_FIFO {asks}{where}; this user may have {have.summary(highest)}" + (
        "" if ok else f". Each node says at start what it could not get, and runs on without it; {FIX}"
    )


class GraphProcesses:
    """Start, watch and stop the processes of a plan. Use as a context manager."""

    def __init__(self, plan: BringupPlan, output: TextIO = sys.stdout, env: dict[str, str] | None = None):
        self.plan = plan
        self.output = output
        # The launcher's pid lets each node stop when this process dies (lifecycle.stop_with_launcher).
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", LAUNCHER_PID_ENV: str(os.getpid()), **(env or {})}
        self.env.pop(REALTIME_ENV, None)  # only the plan asks for real-time scheduling, per node
        self.processes: dict[str, subprocess.Popen] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="sim2real-up-")
        self._pumps: list[threading.Thread] = []
        self._write_lock = threading.Lock()

    def __enter__(self) -> "GraphProcesses":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start every node. Call it from a thread that outlives the graph (the main thread): the
        kernel stops the nodes when the thread that started them ends (PR_SET_PDEATHSIG)."""
        if self.plan.realtime:
            self.output.write(realtime_summary(self.plan) + "\n")
        for spec in self.plan.processes():
            params_file = Path(self._tmp.name) / f"{spec.name}.yaml"
            params_file.write_text(yaml.safe_dump(spec.parameters_document()))
            process = subprocess.Popen(
                process_command(spec, params_file),
                env={**self.env, **spec.environment},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
            )
            self.processes[spec.name] = process
            pump = threading.Thread(target=self._pump, args=(spec.name, process), daemon=True)
            pump.start()
            self._pumps.append(pump)

    def _pump(self, name: str, process: subprocess.Popen) -> None:
        for line in process.stdout:
            with self._write_lock:
                self.output.write(f"[{name}] {line}")
                self.output.flush()

    def exited(self) -> dict[str, int]:
        """Processes that have exited, with their return codes (a node alone is its own process;
        composed, the chain's nodes share ``control_chain``: BringupPlan.process_of)."""
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def wait(
        self,
        duration: float | None = None,
        until: Callable[[], bool] | None = None,
        poll: float = 0.1,
        stop_on_exit: bool = True,
    ) -> str:
        """Block until ``duration`` passes, ``until()`` is true or (``stop_on_exit``) a node
        exits. Returns which."""
        deadline = None if duration is None else time.monotonic() + duration
        while True:
            if until is not None and until():
                return "until"
            if stop_on_exit and self.exited():
                return "exited"
            if deadline is not None and time.monotonic() >= deadline:
                return "duration"
            time.sleep(poll)

    def stop(self, timeout: float = 5.0) -> dict[str, int]:
        """SIGINT every node (what Ctrl-C in `ros2 launch` does), the hardware part after the
        others have exited, then escalate. A second Ctrl-C
        or a SIGTERM while stopping is ignored: it would interrupt the escalation and leave a
        stuck node running."""
        main = threading.current_thread() is threading.main_thread()
        saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
        try:
            # The hardware part last: the supervisor's last command, which holds the joints where
            # they are, must reach a driver (or ros2_control bridge) that is still there to take it.
            roles = {spec.name: spec.role for spec in self.plan.processes()}
            for wave in (
                [n for n in self.processes if roles.get(n) != "hardware"],
                [n for n in self.processes if roles.get(n) == "hardware"],
            ):
                for name in wave:
                    if self.processes[name].poll() is None:
                        self.processes[name].send_signal(signal.SIGINT)
                deadline = time.monotonic() + timeout  # each wave its own: a slow node never cuts the driver's
                for name in wave:
                    process = self.processes[name]
                    try:
                        process.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
        for pump in self._pumps:
            pump.join(timeout=1.0)
        self._tmp.cleanup()
        return {name: p.returncode for name, p in self.processes.items()}
