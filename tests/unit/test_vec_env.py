"""ProcessVecEnv: stacked steps, auto-reset, seeding, broadcast, worker errors, shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from sim2real.train.vec_env import ProcessVecEnv, WorkerError
from tests.cli_runs import process_alive
from tests.unit.toy_env import ToyReach, make_toy, toy_randomization

ROOT = Path(__file__).resolve().parents[2]


def toy_fns(n: int, **kwargs):
    return [partial(make_toy, **kwargs) for _ in range(n)]


def test_step_returns_stacked_arrays_and_auto_resets_on_time_out():
    with ProcessVecEnv(toy_fns(5, max_episode_steps=4), workers=2) as vec:
        assert (vec.num_envs, vec.num_workers, vec.obs_size, vec.num_actions) == (5, 2, 2, 1)
        first = vec.reset(seed=0)
        assert first.shape == (5, 2) and first.dtype == np.float32
        for step in range(4):
            out = vec.step(np.full((5, 1), 0.5))
            assert out.obs.shape == (5, 2) and out.rewards.shape == (5,)
            if step < 3:
                assert not out.dones.any() and out.episodes == []
        assert out.time_outs.all() and not out.terminated.any()
        np.testing.assert_allclose(out.obs, first)  # auto-reset: the next episode's first observation
        assert sorted(i for i, _ in out.episodes) == [0, 1, 2, 3, 4]
        episode = out.episodes[0][1]
        assert episode["length"] == 4 and episode["success"] == 0.0
        expected = sum(-abs(1.0 - 0.05 * k) - 0.01 * 0.25 for k in range(1, 5))
        assert episode["return"] == pytest.approx(expected, rel=1e-5)
        assert set(episode["reward_terms"]) == {"distance", "effort"}
        assert episode["reward_terms"]["effort"] == pytest.approx(-0.01)


def test_termination_is_not_a_time_out():
    with ProcessVecEnv(toy_fns(2, max_episode_steps=100), workers=2) as vec:
        vec.reset(seed=0)
        # |x| > 3 after ~30 steps ends the episode as terminal; ``steps`` is read after the loop.
        for steps in range(1, 40):  # noqa: B007
            out = vec.step(np.ones((2, 1)))
            if out.dones.any():
                break
        assert steps in (30, 31) and out.terminated.all() and not out.time_outs.any()
        assert all(episode["success"] == 0.0 for _, episode in out.episodes)


def rollout(seed: int, workers: int, n: int = 5) -> np.ndarray:
    with ProcessVecEnv(toy_fns(n, obs_noise=0.1, randomization=toy_randomization(0.5, 1.5)), workers=workers) as vec:
        frames = [vec.reset(seed=seed)]
        for k in range(30):
            frames.append(vec.step(np.full((n, 1), np.sin(k))).obs)
        return np.stack(frames)


def test_seeding_is_reproducible_and_independent_of_worker_count():
    a = rollout(seed=3, workers=2)
    np.testing.assert_array_equal(a, rollout(seed=3, workers=2))
    np.testing.assert_array_equal(a, rollout(seed=3, workers=1))
    np.testing.assert_array_equal(a, rollout(seed=3, workers=3))
    assert not np.array_equal(a, rollout(seed=4, workers=2))
    assert not np.array_equal(a[:, 0], a[:, 1])  # env i is seeded with seed + i


def test_env_i_is_seeded_with_seed_plus_i():
    with ProcessVecEnv(toy_fns(3, obs_noise=0.1), workers=2) as vec:
        obs = vec.reset(seed=10)
    for i in range(3):
        single, _ = ToyReach(obs_noise=0.1).reset(seed=10 + i)
        np.testing.assert_array_equal(obs[i], single)


def test_difficulty_and_randomization_reach_every_env():
    with ProcessVecEnv(toy_fns(4), workers=2) as vec:
        vec.set_difficulty(0.5)
        vec.set_randomization(toy_randomization(2.0, 2.0))
        obs = vec.reset(seed=0)
        np.testing.assert_allclose(obs[:, 1], 0.5)
        np.testing.assert_allclose(vec.step(np.ones((4, 1))).obs[:, 0], 0.2, rtol=1e-6)
        assert vec.call("set_difficulty", 0.25) == [None] * 4
        assert vec.get_attr("difficulty") == 0.25
        assert vec.get_attr("task_name") == "reach"


def test_worker_error_is_raised_in_the_parent_with_its_traceback():
    vec = ProcessVecEnv(toy_fns(4, fail_at_step=3), workers=2)
    vec.reset(seed=0)
    vec.step(np.zeros((4, 1)))
    vec.step(np.zeros((4, 1)))
    with pytest.raises(WorkerError) as error:
        vec.step(np.zeros((4, 1)))
    message = str(error.value)
    assert "worker 0" in message and "FloatingPointError: toy env exploded on purpose" in message
    assert "toy_env.py" in message  # the worker's own traceback, not just the exception
    assert vec.closed
    assert all(not p.is_alive() for p in vec._processes)


def _broken_factory():
    raise RuntimeError("no such robot")


def test_env_construction_error_is_raised_at_start():
    with pytest.raises(WorkerError, match="no such robot"):
        ProcessVecEnv([_broken_factory, _broken_factory], workers=2)


def test_bad_action_shape_is_refused():
    with ProcessVecEnv(toy_fns(2), workers=1) as vec:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match=r"shape \(2, 1\)"):
            vec.step(np.zeros((3, 1)))


def test_close_stops_workers_and_is_idempotent():
    vec = ProcessVecEnv(toy_fns(3), workers=2)
    processes = list(vec._processes)
    vec.close()
    vec.close()
    assert all(not p.is_alive() for p in processes)
    with pytest.raises(RuntimeError, match="closed"):
        vec.reset()


def test_workers_die_with_the_parent():
    script = textwrap.dedent("""
        import sys, time
        from functools import partial
        from sim2real.train.vec_env import ProcessVecEnv
        from tests.unit.toy_env import make_toy
        if __name__ == "__main__":
            vec = ProcessVecEnv([partial(make_toy) for _ in range(2)], workers=2)
            print(" ".join(str(p.pid) for p in vec._processes), flush=True)
            time.sleep(60)
    """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
    )
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(process_alive(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(process_alive(pid) for pid in pids)
