"""benchmarks/transfer.py's plan: every step is one of the project's commands, printed before it
runs; ``--dry-run`` prints them all and touches nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_dry_run_prints_the_pipeline_row_in_order_and_writes_nothing(tmp_path):
    out = tmp_path / "transfer"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "transfer.py"),
            "--rows",
            "pipeline",
            "--dry-run",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert not out.exists()
    steps = [line.split("sim2real ", 1)[1] for line in result.stdout.splitlines() if line.startswith("  run  ")]
    base = str(out / "policies" / "sysid_latency_go2_worn.onnx")
    failures = str(out / "measure" / "go2_worn" / "failures_sysid_latency_go2_worn")
    # The base row is measured and trained first; the pipeline starts from its policy.
    assert steps.index(next(s for s in steps if s.startswith("dr from-latency"))) < steps.index(
        next(s for s in steps if s.startswith("train --config") and "sysid_latency" in s)
    )
    walks = [s for s in steps if s.startswith("up ") and f"--failures-dir {failures}" in s]
    assert [w.split("--reality-robot ")[1].split()[0] for w in walks] == ["0", "1", "2"]
    assert all(f"--policy {base}" in w and "--reality go2_worn" in w and "--lockstep" in w for w in walks)
    stages = [s.split()[1] for s in steps if s.startswith("pipeline ")]
    assert stages == ["adapt", "retrain", "validate", "push"]
    assert f"--failures {failures}" in next(s for s in steps if s.startswith("pipeline validate"))
    retrain = next(s for s in steps if s.startswith("pipeline retrain"))
    assert f"--checkpoint {out / 'sysid_latency_go2_worn'}" in retrain and "--iterations 300" in retrain
    # The push goes into a graph walking a reality robot with the base policy, allowed the push folder.
    graph = next(s for s in steps if s.startswith("up ") and "--no-failure-collector --policy-dirs" in s)
    assert f"--policy {base}" in graph and str(out / "pipeline_go2_worn" / "pushed") in graph
    candidate = str(out / "pipeline_go2_worn" / "candidate.onnx")
    assert steps[-2].startswith(f"eval {candidate} --worlds nominal reality:go2_worn reality:go2_independent")
    assert steps[-1].startswith(f"eval {candidate} --suite go2_walk --worlds reality:go2_worn")
