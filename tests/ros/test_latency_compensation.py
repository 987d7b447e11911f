"""Latency in a real rclpy graph: the runtime measures the injected actuation latency, and
compensating it improves the shipped reach policy's tracking (lockstep)."""

from __future__ import annotations

import pytest

from sim2real.graph.latency_trial import reach_trial

pytestmark = [pytest.mark.ros, pytest.mark.slow]
INJECTED_S = 0.020
DURATION_S = 15.0


def trials(out) -> dict:
    """The shipped reach policy without and with compensation, 20 ms injected: two whole-graph
    runs of 15 s of script each (plus start-up)."""
    import os

    os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    for name in ("without", "with"):
        (out / name).mkdir()
    without = reach_trial(INJECTED_S, False, duration=DURATION_S, out=out / "without")
    # The operator's workflow: measure the latency (policy command -> motors) on a first run, then
    # compensate it. The live estimate alone arrives too late here: without compensation the
    # policy starts oscillating within a few seconds of engaging, and an oscillating arm under a
    # damping supervisor is no ground to fit a delay on.
    # The supervisor forwards a policy command in the tick it answers (in lockstep it waits for
    # it), so the path from the policy's command to the motors is the driver's share alone. The
    # whole path's own fit (actuation_p50_ms) aliases by a period on an oscillating arm.
    measured = float(without["policy_runtime"]["driver_actuation_p50_ms"]) * 1e-3
    with_compensation = reach_trial(INJECTED_S, True, duration=DURATION_S, horizon=measured, out=out / "with")
    return {False: without, True: with_compensation}


@pytest.mark.timing_sensitive(
    reason="lockstep, yet the runs' trajectories differ (uncompensated: 2.4-32 cm in five local "
    "runs, two of them driving joint 4 past its limit and taken over); docs/estimation_latency.md"
)
def test_the_runtime_measures_the_injected_latency_and_compensating_it_improves_tracking(tmp_path):
    """One test, so that a rerun runs both trials again."""
    runs = trials(tmp_path)
    runtime = runs[True]["policy_runtime"]
    # The sim injects its latency between /joint_commands and the motors: the driver's share.
    measured_ms = float(runtime["driver_actuation_p50_ms"])
    assert abs(measured_ms - INJECTED_S * 1e3) <= 2.0, runtime
    for key in (
        "actuation_p50_ms",
        "actuation_p99_ms",
        "driver_actuation_p99_ms",
        "sensor_to_command_p50_ms",
        "sensor_to_command_p99_ms",
        "sensor_to_command_max_ms",
    ):
        assert key in runtime, runtime

    without = runs[False]["summary"]["reach_error_settled_mean_m"]
    with_compensation = runs[True]["summary"]["reach_error_settled_mean_m"]
    assert runtime["compensation"] == "on"
    # Both runs score the same script from engagement on, however long start-up took.
    assert runs[False]["script_start"]["by"] == runs[True]["script_start"]["by"] == "active"
    print(
        f"\nsettled reach error at {INJECTED_S * 1e3:.0f} ms injected: {without * 100:.1f} cm without "
        f"compensation, {with_compensation * 100:.1f} cm with"
    )
    assert with_compensation < 0.8 * without, (
        with_compensation,
        without,
        runtime.get("action_guard_trips"),
        runtime.get("last_action_guard"),
        runs[True].get("supervisor_modes"),
    )
