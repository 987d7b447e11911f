import numpy as np
from PIL import Image

from sim2real.core.robot_profile import load_profile
from sim2real.evaluate.replay_video import render_gif


def test_recorded_motion_becomes_an_animated_gif(tmp_path):
    profile = load_profile("go2")
    t = np.linspace(0.0, 1.0, 101)
    q = profile.default_positions + 0.3 * np.sin(2 * np.pi * t)[:, None]
    base = np.stack([0.5 * t, 0 * t, 0.3 + 0 * t], axis=1)
    orientation = np.tile([0.0, 0.0, 0.0, 1.0], (t.size, 1))
    out = render_gif(profile, t, q, tmp_path / "walk.gif", base, orientation, fps=10, size=(160, 120))
    with Image.open(out) as gif:
        assert gif.n_frames == 10 and gif.size == (160, 120)
        frames = []
        for i in (0, 5):
            gif.seek(i)
            frames.append(np.asarray(gif.convert("RGB"), dtype=float))
    assert np.abs(frames[0] - frames[1]).mean() > 1.0, "the robot moved, the frames must differ"


def test_fixed_base_arm_renders(tmp_path):
    profile = load_profile("panda")
    t = np.linspace(0.0, 0.5, 11)
    q = np.tile(profile.default_positions, (t.size, 1))
    out = render_gif(profile, t, q, tmp_path / "arm.gif", fps=10, size=(80, 60))
    assert out.stat().st_size > 1000
