#!/usr/bin/env python3
"""The real-time Go2 graph under CPU load, with and without `realtime:=true`.

Each run brings up the plan `sim2real demo` runs (sim_robot in real time, safety_supervisor,
state_estimator, policy_runtime with the shipped walking policy, demo_script, failure_collector),
engaged on start, and lets demo_script play its walk script (then hold a zero command) for
--seconds. Runs, side by side in one invocation:

  normal            the graph at normal priority, no other load
  normal + hog      the same with two CPU hogs: one busy loop at 100 % of a core and one at 50 %
                    (10 ms busy, 10 ms asleep), as perception or a build on the robot computer
  realtime          realtime:=true (SCHED_FIFO hardware 80 > supervisor 70 > runtime 60 >
                    estimator 50, memory locked), optionally pinned with --realtime-cpus
  realtime + hog    the same with the hogs

Figures per run (the safety config's deadlines are what they are; nothing here widens them):
  trips             supervisor trips (its /diagnostics `trips`), with the last trip's reason
  sim rate          sim_robot's sensing loop: ticks per wall second / 500 Hz (the real-time sim)
  delivered         /joint_states samples received by this benchmark's subscriber / sensing periods
                    elapsed (a monitoring node at normal priority: what it sees)
  on time           sensing periods on time at the state estimator (the chain's lowest priority):
                    1 - its IMU stamp gaps (a sample over 1.5 periods after the one before, counted
                    in imu_samples_missed: a sim tick published late counts, though it arrives) /
                    the periods the sim stepped meanwhile
  tick p99 / max    policy_runtime's state stamp -> command out (its latency diagnostics)
  skipped           policy ticks without a command
  fell              the robot's base went below 0.15 m
  cpu               each node's CPU, % of one core, over the run
  locked memory     each real-time node's locked (resident) memory, MiB

--composed runs the control chain (supervisor, estimator, runtime) as one process
(composed:=true); its CPU is then the chain's column.

Examples:
    .venv/bin/python benchmarks/realtime_load.py                        # 10 minutes per run
    .venv/bin/python benchmarks/realtime_load.py --seconds 60 --json
    .venv/bin/python benchmarks/realtime_load.py --runs realtime+hog --realtime-cpus 1
    .venv/bin/python benchmarks/realtime_load.py --runs normal+hog realtime+hog --composed
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from _graph import Hogs, SpunNode, cpu_seconds  # benchmarks/_graph.py
from sim2real.core.paths import share_dir
from sim2real.graph.plan import make_plan
from sim2real.graph.reported_run import demo_environment

RUNS = ("normal", "normal+hog", "realtime", "realtime+hog")
CPU_COLUMNS = {  # process -> its column's short name
    "sim_robot": "sim",
    "safety_supervisor": "sup",
    "state_estimator": "est",
    "policy_runtime": "run",
    "control_chain": "chain",
    "demo_script": "demo",
    "failure_collector": "fail",
}
SENSING_HZ = 500.0


def locked_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmLck:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Watch(SpunNode):
    """A subscriber of this process: /joint_states receipts and the nodes' /diagnostics."""

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState

        from sim2real.nodes import qos

        super().__init__("realtime_load_watch")
        self.lock = threading.Lock()
        self.states = 0
        self.first_state = None
        self.statuses: dict[str, list[tuple[float, dict]]] = {}
        self.node.create_subscription(JointState, "/joint_states", self._on_state, qos.SENSOR_SUBSCRIBE, raw=True)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.node.create_subscription(DiagnosticArray, "/safety/status", self._on_diagnostics, 50)
        self.start()

    def _on_state(self, _msg) -> None:
        with self.lock:
            self.states += 1
            if self.first_state is None:
                self.first_state = time.monotonic()

    def _on_diagnostics(self, msg) -> None:
        now = time.monotonic()
        with self.lock:
            for status in msg.status:
                self.statuses.setdefault(status.name, []).append((now, {kv.key: kv.value for kv in status.values}))

    def reset(self) -> None:
        with self.lock:
            self.states, self.first_state, self.statuses = 0, None, {}

    def snapshot(self) -> tuple[int, float | None, dict]:
        with self.lock:
            return self.states, self.first_state, {k: list(v) for k, v in self.statuses.items()}


def run_once(name: str, seconds: float, realtime_cpus: str, watch: Watch, out: Path, composed: bool = False) -> dict:
    from sim2real.graph.processes import GraphProcesses

    realtime = name.startswith("realtime")
    plan = make_plan(
        robot="go2",
        policy=str(share_dir() / "policies" / "go2_walk.onnx"),
        demo=True,
        autoengage=True,
        realtime=realtime,
        realtime_cpus=realtime_cpus if realtime else "",
        failures_dir=str(out / "failures"),
        composed=composed,
    )
    report = out / f"{name}.json"
    nodes = tuple(
        dataclasses.replace(n, parameters={**n.parameters, "report_path": str(report), "duration": seconds})
        if n.name == "demo_script"
        else n
        for n in plan.nodes
    )
    plan = dataclasses.replace(plan, nodes=nodes)
    watch.reset()
    log = open(out / f"{name}.log", "w")
    started = time.monotonic()
    try:
        with Hogs(name.endswith("+hog")), GraphProcesses(plan, output=log, env=demo_environment()) as graph:
            cpu0 = {n: cpu_seconds(p.pid) for n, p in graph.processes.items()}
            cpu_now = dict(cpu0)
            locked: dict[str, float] = {}

            def demo_done() -> bool:
                for n, p in graph.processes.items():  # the last reading of each, before it exits
                    try:
                        cpu_now[n] = cpu_seconds(p.pid)
                        locked[n] = locked_mib(p.pid)
                    except (FileNotFoundError, ProcessLookupError, IndexError):
                        pass
                return "demo_script" in graph.exited()

            graph.wait(duration=seconds + 120.0, until=demo_done, poll=0.5)
            wall = time.monotonic() - started
            cpu = {n: round(100.0 * (cpu_now[n] - cpu0[n]) / wall, 1) for n in graph.processes}
            states, first_state, statuses = watch.snapshot()
            ended = time.monotonic()
    finally:
        log.close()
    result = {
        "run": name,
        "composed": composed,
        "seconds": seconds,
        "cpu_percent": cpu,
        "locked_mib": {n: round(v) for n, v in locked.items() if v},
    }
    sim = statuses.get("sim_robot: sensing loop", [])
    if len(sim) >= 2:
        (t0, first), (t1, last) = sim[0], sim[-1]
        result["sim_rate"] = round((int(last["ticks"]) - int(first["ticks"])) / (t1 - t0) / SENSING_HZ, 3)
        result["sim_missed_fraction"] = float(last["missed_fraction"])
    if first_state is not None:
        result["delivered"] = round(states / ((ended - first_state) * SENSING_HZ), 3)
    estimator = statuses.get("state_estimator: divergence", [])
    if len(sim) >= 2 and len(estimator) >= 2:
        missed = int(estimator[-1][1]["imu_samples_missed"]) - int(estimator[0][1]["imu_samples_missed"])
        sent = (
            (int(sim[-1][1]["ticks"]) - int(sim[0][1]["ticks"]))
            * (estimator[-1][0] - estimator[0][0])
            / (sim[-1][0] - sim[0][0])
        )
        result["on_time_at_chain"] = round(1.0 - missed / sent, 4) if sent > 0 else None
    supervisor = [
        values
        for key, entries in statuses.items()
        if key.startswith("safety_supervisor")
        for _, values in entries
        if "trips" in values
    ]
    if supervisor:
        result["trips"] = int(supervisor[-1]["trips"])
        result["last_trip"] = supervisor[-1].get("last_trip", "")
    if report.exists():
        data = json.loads(report.read_text())
        runtime = data.get("policy_runtime", {})
        for key in ("tick_latency_p99_ms", "tick_latency_max_ms", "ticks", "ticks_skipped"):
            if key in runtime:
                result[key] = float(runtime[key])
        result["fell"] = bool(data["summary"].get("fell"))
        result["modes"] = [e["mode"] for e in data.get("supervisor_modes", [])]
    else:
        result["error"] = f"no demo report; see {out / (name + '.log')}"
    return result


def nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0, help="demo seconds per run")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS), help="which runs, in this order")
    parser.add_argument("--realtime-cpus", default="", help="realtime_cpus:= for the realtime runs ('' = no pinning)")
    parser.add_argument("--out", default="", help="folder for the runs' logs and reports (default: a temporary one)")
    parser.add_argument(
        "--composed", action="store_true", help="the control chain in one process (composed:=true) in every run"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    os.environ.update(demo_environment())  # the watch sees the graph's loopback-only discovery too
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="realtime-load-"))
    out.mkdir(parents=True, exist_ok=True)
    watch = Watch()
    results = []
    try:
        for name in args.runs:
            print(f"{name}: {args.seconds:.0f} s ...", file=sys.stderr, flush=True)
            results.append(run_once(name, args.seconds, args.realtime_cpus, watch, out, args.composed))
    finally:
        watch.close()
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"load_average": load, "cpus": os.cpu_count(), "results": results}, indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; logs in {out}")
    columns = [n for n in CPU_COLUMNS if any(n in r["cpu_percent"] for r in results)]
    print(
        f"{'run':14s} {'trips':>5s} {'sim rate':>8s} {'delivered':>9s} {'on time':>8s} {'tick p99':>8s} {'max':>7s} "
        f"{'skipped':>7s} {'fell':>5s}  cpu % ({'/'.join(CPU_COLUMNS[n] for n in columns)})"
    )
    for r in results:
        cpu = r["cpu_percent"]
        shares = "/".join(f"{cpu.get(n, float('nan')):.0f}" for n in columns)
        print(
            f"{r['run']:14s} {r.get('trips', '?'):>5} {r.get('sim_rate', float('nan')):8.3f} "
            f"{r.get('delivered', float('nan')):9.3f} {nan_if_none(r.get('on_time_at_chain')):8.4f} "
            f"{r.get('tick_latency_p99_ms', float('nan')):6.1f}ms "
            f"{r.get('tick_latency_max_ms', float('nan')):5.0f}ms {r.get('ticks_skipped', float('nan')):7.0f} "
            f"{str(r.get('fell', '?')):>5s}  {shares}"
            + (f"  {r['error']}" if "error" in r else "")
            + (f"  last trip: {r['last_trip']}" if r.get("trips") else "")
        )
        if r["locked_mib"]:
            print(f"{'':14s} locked memory MiB: {r['locked_mib']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
