"""One reach run of the shipped policy under an injected actuation latency, with or without
compensation: the whole graph in lockstep (deterministic, independent of machine load), as
``sim2real demo`` runs it. Used by ``benchmarks/latency.py`` and the graph tests."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from sim2real.core.shipped_policies import shipped_policy
from sim2real.graph.plan import make_plan
from sim2real.graph.reported_run import run_until_report

TRIAL_DURATION_S = 15.0  # three goals of the reach script


def reach_trial(
    latency: float,
    compensation: bool,
    duration: float = TRIAL_DURATION_S,
    timeout: float = 600.0,
    horizon: float = 0.0,
    out: Path | None = None,
) -> dict:
    """The demo report (``summary``: reach errors; ``policy_runtime``: its diagnostics, latency
    figures included) of one lockstep run of ``policies/panda_reach.onnx``."""
    policy = shipped_policy("panda")
    if policy is None:
        raise FileNotFoundError("policies/panda_reach.onnx is missing: the latency trial runs the shipped policy")
    out = Path(out or tempfile.mkdtemp(prefix="latency_trial_"))
    out.mkdir(parents=True, exist_ok=True)
    plan = make_plan(
        robot="panda",
        policy=str(policy),
        demo=True,
        autoengage=True,
        lockstep=True,
        conditions=f"{{latency: {latency}}}",
        latency_compensation=compensation,
        # A measurement, not a deployment: no bundles in the user's ~/.sim2real/failures.
        failure_collector=False,
    )
    nodes = []
    for node in plan.nodes:
        parameters = dict(node.parameters)
        if node.name == "demo_script":
            parameters["duration"] = float(duration)
        if node.name == "policy_runtime":
            parameters["fit_actuation"] = True  # the trial reports the measured actuation latency, off or on
        if node.name == "policy_runtime" and horizon > 0:
            parameters["compensation_horizon"] = float(horizon)
        nodes.append(dataclasses.replace(node, parameters=parameters))
    plan = dataclasses.replace(plan, nodes=tuple(nodes))
    report, wall = run_until_report(plan, "demo_script", out / "report.json", timeout)
    if report is None:
        raise RuntimeError(f"the reach trial (latency {latency} s, compensation {compensation}) produced no report")
    report["wall_s"] = wall
    return report
