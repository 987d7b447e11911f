import numpy as np

from sim2real.core import command_script
from sim2real.core.command_script import DemoRecorder, segment_at


def test_segments_follow_the_script():
    assert segment_at(command_script.WALK_SCRIPT, 0.0) == (0, (0.0, 0.0, 0.0))
    assert segment_at(command_script.WALK_SCRIPT, 5.0) == (1, (0.5, 0.0, 0.0))
    assert segment_at(command_script.WALK_SCRIPT, 29.0)[0] == len(command_script.WALK_SCRIPT) - 1


def test_walk_figures_from_a_known_motion(tmp_path):
    recorder = DemoRecorder("quadruped")
    for k in range(1001):  # 10 s at 100 Hz: stand 3 s, then 0.45 m/s against a 0.5 m/s command
        t = k * 0.01
        segment, command = segment_at(command_script.WALK_SCRIPT, t)
        speed = 0.45 if segment == 1 else 0.0
        x = 0.45 * max(0.0, t - 3.0)
        recorder.add(t, segment, np.zeros(12), command, (speed, 0.0, 0.0), (x, 0.0, 0.3), (0, 0, 0, 1))
    summary = recorder.summary()
    assert abs(summary["distance_m"] - 0.45 * 7.0) < 0.01
    assert abs(summary["velocity_error_mean_mps"] - 0.05) < 1e-9
    assert abs(summary["segment_mean_velocity_error_mps"] - 0.05) < 1e-9
    assert summary["fell"] is False
    recorder.save(tmp_path / "run.npz")
    assert np.load(tmp_path / "run.npz")["base_positions"].shape == (1001, 3)


def test_reach_figures_count_goals_reached():
    recorder = DemoRecorder("arm")
    for k in range(1000):
        t = k * 0.01
        segment, goal = segment_at(command_script.REACH_SCRIPT, t)
        miss = 0.01 if segment == 0 else 0.05
        recorder.add(t, segment, np.zeros(7), goal, np.asarray(goal) + [miss, 0, 0])
    summary = recorder.summary()
    assert summary["goals"] == 2 and summary["goals_within_2cm"] == 1
    assert abs(summary["reach_error_final_max_m"] - 0.05) < 1e-9
