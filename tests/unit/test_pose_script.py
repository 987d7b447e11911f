import numpy as np

from sim2real.core.pose_script import PoseScript, TrackingReport


def test_script_holds_then_moves_within_limits_then_settles():
    default = np.array([0.0, 1.0])
    script = PoseScript(default, lower=np.array([-1.0, 0.9]), upper=np.array([1.0, 2.0]), hold=1, move=2, settle=1)
    assert script.phase(0.5) == "hold" and np.array_equal(script.target(0.5), default)
    # The second joint is 0.1 rad from its lower limit: its amplitude is capped at half of that.
    np.testing.assert_allclose(script.amplitudes, [0.2, 0.05])
    moving = np.array([script.target(t) for t in np.linspace(1, 3, 201)])
    assert np.all(moving >= [-1, 0.9]) and np.all(moving <= [1, 2])
    assert moving[:, 0].max() > 0.19
    assert script.phase(3.5) == "settle" and script.phase(4.0) == "done"


def test_report_counts_gaps_and_errors(tmp_path):
    report = TrackingReport(sensing_period=0.002)
    for i, stamp in enumerate([0.0, 0.002, 0.004, 0.010, 0.012]):
        report.add("hold", stamp, np.array([0.1 * i]), np.array([0.0]))
    summary = report.summary()
    assert summary["joint_states_received"] == 5
    assert summary["joint_states_gaps_over_1.5_periods"] == 1
    assert abs(summary["hold_max_error_rad"] - 0.4) < 1e-12
    report.save_series(tmp_path / "s.npz", ["j"])
    data = np.load(tmp_path / "s.npz")
    assert data["measured"].shape == (5, 1) and data["t"][0] == 0.0
