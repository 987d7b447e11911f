"""Training and evaluation on a real Ray cluster: a head and two worker nodes (each its own
raylet, with one CPU) started on this machine for the module, as ``ray start`` starts them on
a lab's machines. Equality with the local runner, a worker killed mid-collection, sharded
evaluation, and Ray left unimported without ``--ray``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from functools import partial

import numpy as np
import pytest
import ray  # the `ray` extra, which `make install` installs
import torch
from ray.cluster_utils import Cluster

from sim2real.cli.main import main
from sim2real.core.robot_profile import load_profile
from sim2real.evaluate.evaluate import evaluate_policy
from sim2real.evaluate.suite import evaluate_suite
from sim2real.train.checkpoint import load_checkpoint
from sim2real.train.export import export_policy
from sim2real.train.ray_cluster import RayError, check_room
from sim2real.train.ray_vec_env import REPLACEMENT_SEED_STRIDE, RayVecEnv
from sim2real.train.runner import Trainer
from sim2real.train.train_config import load_train_config
from sim2real.train.vec_env import ProcessVecEnv, RolloutLost
from tests.policy_models import write_target_policy
from tests.unit.eval_suites import SHORT_SUITE
from tests.unit.toy_env import (
    TOY_TRAIN_CONFIG,
    make_toy,
    make_toy_task,
    make_toy_task_that_dies_once,
    toy_randomization,
    toy_training_config,
    write_toy_randomization,
)

# One cluster for the module: its tests stay on one pytest-xdist worker (`--dist loadgroup`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray_cluster")]
GO2 = load_profile("go2")
WIDE = toy_randomization(0.5, 1.5)


@contextlib.contextmanager
def _not_idle():
    """Under SIM2REAL_TEST_PRIORITY=idle this test process runs at SCHED_IDLE, which a lockstep graph test
    beside it can starve of CPU for a minute and more, past Ray's own timeouts (a node's start,
    the health checks the head makes every few seconds). The cluster's processes, started from
    here, and this driver run at SCHED_OTHER with nice 10 while the module's tests run (each
    test's own local Ray too): a small share of a busy machine (a tenth of a nice-0 process's),
    never none. Only the calling thread changes, and what it starts from then on (the cluster's
    processes, the driver's threads). Without the privilege to leave SCHED_IDLE the process
    stays as it is."""
    if os.sched_getscheduler(0) != os.SCHED_IDLE:
        yield
        return
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(niceness, 10))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:  # no RLIMIT_NICE room (or CAP_SYS_NICE) to leave SCHED_IDLE
        with contextlib.suppress(PermissionError):  # nor to come back from nice 10
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        with contextlib.suppress(PermissionError):  # back from nice 10 needs RLIMIT_NICE room
            os.setpriority(os.PRIO_PROCESS, 0, niceness)


@pytest.fixture(scope="module", autouse=True)
def not_idle():
    with _not_idle():
        yield


@pytest.fixture(scope="module")
def cluster():
    """A head with no CPU of its own and two worker nodes of one CPU: every env worker lands
    on a worker node, as on a cluster whose head only schedules."""
    with socket.socket() as probe:  # a free port: not Ray's default 6379, which a lab's own Ray may hold
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    head = Cluster(
        initialize_head=True,
        head_node_args={
            "gcs_server_port": port,
            "num_cpus": 0,
            "object_store_memory": 100 * 1024**2,
            "include_dashboard": False,
        },
    )
    for _ in range(2):
        head.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
    head.wait_for_nodes()
    ray.init(address=head.address, logging_level="WARNING")
    try:
        yield head
    finally:
        ray.shutdown()
        head.shutdown()


@pytest.fixture
def toy_config(tmp_path):
    return toy_training_config(tmp_path)


def _toy_fns(n: int, **kwargs):
    return [partial(make_toy, max_episode_steps=5, **kwargs) for _ in range(n)]


def test_ray_workers_step_the_arrays_of_local_workers(cluster):
    actions = np.random.default_rng(0).uniform(-1, 1, (12, 5, 1)).astype(np.float32)
    with ProcessVecEnv(_toy_fns(5), workers=2) as local, RayVecEnv(_toy_fns(5), workers=2) as remote:
        np.testing.assert_array_equal(local.reset(seed=3), remote.reset(seed=3))
        local.set_difficulty(0.5)
        remote.set_difficulty(0.5)
        for a in actions:
            mine, theirs = local.step(a), remote.step(a)
            for k in range(4):
                np.testing.assert_array_equal(mine[k], theirs[k])
            assert mine.episodes == theirs.episodes
        assert remote.call("set_difficulty", 0.7) == [None] * 5
        assert remote.get_attr("difficulty") == 0.7


def _gains(seeds: list[int]) -> list[float]:
    """The motor strength the toy draws at a reset with each seed, under WIDE."""
    gains = []
    for seed in seeds:
        env = make_toy(randomization=WIDE)
        env.reset(seed=seed)
        gains.append(env.gain)
    return gains


def _wait_until_restarted(vec: RayVecEnv, index: int, pid: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "Ray did not restart the worker"
        try:
            if vec.worker_pids()[index] != pid:  # answered by the restarted process
                return
        except ray.exceptions.RayActorError:  # restarting
            pass
        time.sleep(0.2)


def test_a_worker_killed_mid_step_is_replaced_with_its_settings_and_new_episodes(cluster):
    messages: list[str] = []
    with RayVecEnv(_toy_fns(4, randomization=WIDE), workers=2, privileged=True, on_replace=messages.append) as vec:
        vec.reset(seed=10)
        vec.set_difficulty(0.25)
        vec.step(np.full((4, 1), 0.5, np.float32))
        os.kill(vec.worker_pids()[1], signal.SIGKILL)
        with pytest.raises(RolloutLost) as lost:
            vec.step(np.full((4, 1), 0.5, np.float32))
        # Every env starts a new episode, at the difficulty the learner set (goal 0.25), drawn
        # from the last reset's seeds moved on once.
        assert lost.value.workers == [1] and lost.value.envs == [0, 1, 2, 3]
        np.testing.assert_allclose(lost.value.obs, [[0.0, 0.25]] * 4, atol=1e-6)
        moved = [10 + i + REPLACEMENT_SEED_STRIDE for i in range(4)]
        np.testing.assert_allclose(lost.value.privileged[:, 0], _gains(moved), rtol=1e-6)
        assert vec.replacements == 1 and "Ray env worker 1 (envs 2..3) was lost" in messages[0]
        assert vec.get_attr("difficulty") == 0.25 and vec.call("set_difficulty", 0.25)
        assert vec.step(np.zeros((4, 1), np.float32)).obs.shape == (4, 2)
        # A command other than a step is sent again to the replacement ...
        os.kill(vec.worker_pids()[0], signal.SIGKILL)
        assert vec.call("set_difficulty", 0.5) == [None] * 4 and vec.replacements == 2
        # ... and the next step starts every env on a new episode: the learner's observations are old.
        with pytest.raises(RolloutLost) as lost:
            vec.step(np.zeros((4, 1), np.float32))
        assert lost.value.workers == [] and "lost mid-step" not in str(lost.value)
        np.testing.assert_allclose(lost.value.obs, [[0.0, 0.5]] * 4, atol=1e-6)
        assert vec.step(np.zeros((4, 1), np.float32)).obs.shape == (4, 2)


def test_a_worker_restarted_while_idle_is_noticed_before_it_is_stepped(cluster):
    """Ray restarts a killed worker by itself. With an open connection the learner's next step
    meets its end of file; with none (after a lost step closed them all) the new process's
    identity tells the learner its envs are not the ones it knows, before any is stepped."""
    with RayVecEnv(_toy_fns(4), workers=2, on_replace=lambda message: None) as vec:
        vec.reset(seed=0)
        vec.set_difficulty(0.5)
        vec.step(np.zeros((4, 1), np.float32))
        for index in (0, 1):  # the first with its connection open, the second with none
            pid = vec.worker_pids()[index]
            os.kill(pid, signal.SIGKILL)
            _wait_until_restarted(vec, index, pid)
            with pytest.raises(RolloutLost) as lost:
                vec.step(np.zeros((4, 1), np.float32))
            assert lost.value.workers == [index] and vec.replacements == index + 1
            assert vec.get_attr("difficulty") == 0.5  # the settings reached the replacement
            np.testing.assert_allclose(lost.value.obs, [[0.0, 0.5]] * 4, atol=1e-6)


def test_workers_killed_again_and_again_are_replaced_each_time(cluster):
    with RayVecEnv(_toy_fns(4), workers=2, on_replace=lambda message: None) as vec:
        vec.reset(seed=0)
        for kill in range(3):
            vec.step(np.zeros((4, 1), np.float32))
            os.kill(vec.worker_pids()[kill % 2], signal.SIGKILL)
            with pytest.raises(RolloutLost):
                vec.step(np.zeros((4, 1), np.float32))
        assert vec.replacements == 3 and vec.step(np.zeros((4, 1), np.float32)).obs.shape == (4, 2)


def test_an_env_error_on_ray_is_the_workers_traceback_not_a_replacement(cluster):
    with RayVecEnv(_toy_fns(2, fail_at_step=2), workers=2) as vec:
        vec.reset(seed=0)
        vec.step(np.zeros((2, 1), np.float32))
        with pytest.raises(Exception, match="toy env exploded on purpose") as error:
            vec.step(np.zeros((2, 1), np.float32))
        assert type(error.value).__name__ == "WorkerError" and vec.replacements == 0


def test_more_workers_than_the_cluster_has_cpus_for_are_refused_at_once(cluster):
    with pytest.raises(RayError, match=r"2 CPUs; 3 workers need 1 each. Fix: --workers 2"):
        check_room(ray, 3, 1.0)


def test_training_on_ray_gives_the_weights_of_the_local_runner(cluster, toy_config, tmp_path):
    local = Trainer(toy_config, tmp_path / "local", make_env=make_toy_task, progress=False).run()
    remote = Trainer(toy_config, tmp_path / "ray", make_env=make_toy_task, progress=False, ray_address="auto").run()
    mine, theirs = load_checkpoint(local.checkpoint), load_checkpoint(remote.checkpoint)
    for part in ("actor_state_dict", "critic_state_dict"):
        for name, tensor in mine[part].items():
            assert torch.equal(tensor, theirs[part][name]), f"{part}.{name} differs"
    assert mine["adr"] == theirs["adr"] and mine["curriculum"] == theirs["curriculum"]
    episodes = [[(r["episodes"], r.get("iteration_return")) for r in run.history] for run in (local, remote)]
    assert episodes[0] == episodes[1] and episodes[0][-1][0] == 4


def test_a_worker_lost_mid_collection_is_replaced_and_the_run_finishes(cluster, toy_config, tmp_path, capsys):
    marker = tmp_path / "died"
    make_env = partial(make_toy_task_that_dies_once, marker=str(marker), die_at_step=12)  # iteration 2 of 3
    result = Trainer(toy_config, tmp_path / "ray", make_env=make_env, progress=False, ray_address="auto").run()
    assert marker.exists() and result.iterations == 3 and not result.interrupted
    err = capsys.readouterr().err
    assert "was lost; Ray restarted it (replacement 1)" in err
    assert "4 envs lost their episodes with a worker; this iteration's rollout is collected again" in err
    assert len(list((tmp_path / "ray").glob("model_*.pt"))) == 3


def test_cli_train_with_ray_alone_starts_a_local_ray(tmp_path):
    """`--ray` with no address: a Ray of this machine for the command (its own process here,
    beside the module's cluster)."""
    out = tmp_path / "run"
    argv = ["train", "--robot", "panda", "--task", "reach", "--out", str(out), "--iterations", "1"]
    argv += ["--num-envs", "2", "--workers", "2", "--no-progress", "--ray"]
    run = subprocess.run([sys.executable, "-m", "sim2real.cli", *argv], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "2 envs over 2 Ray actors (a local Ray started for this run)" in run.stdout
    assert (out / "model_1.pt").exists()


def test_without_ray_the_commands_do_not_import_it():
    code = (
        "import sys\n"
        "from sim2real.cli.main import build_parser\n"
        "import sim2real.train.runner, sim2real.evaluate.evaluate, sim2real.evaluate.suite\n"
        "build_parser().parse_args(['train', '--robot', 'go2'])\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_evaluation_sharded_on_ray_equals_the_local_one(cluster, tmp_path):
    folder = tmp_path / "toy"
    folder.mkdir()
    trained_on = write_toy_randomization(folder / "trained_on.yaml", 0.8, 1.2)
    config_path = folder / "toy_reach.yaml"
    config_path.write_text(TOY_TRAIN_CONFIG + f"randomization: {trained_on}\n")
    checkpoint = Trainer(load_train_config("toy", "reach", config_path), folder / "run", make_env=make_toy_task)
    policy = export_policy(checkpoint.run().checkpoint, folder / "toy.onnx").path
    kwargs = dict(worlds=["nominal", "dr"], episodes=7, seed=5, make_env=make_toy_task, progress=False)
    local = evaluate_policy(policy, workers=2, **kwargs).to_dict()
    sharded = evaluate_policy(policy, workers=2, ray_address="auto", **kwargs).to_dict()
    assert local == sharded
    assert [len(w["returns"]) for w in sharded["worlds"]] == [7, 7]


def test_a_suite_sharded_on_ray_equals_the_local_one(cluster, tmp_path):
    suite = tmp_path / "go2_short.yaml"
    suite.write_text(SHORT_SUITE)
    policy = write_target_policy(tmp_path / "hold.onnx", GO2, GO2.default_positions)
    kwargs = dict(worlds=["nominal", "go2_reference"], scenarios=["stand_still", "shoved"], episodes=1, seed=3)
    local = evaluate_suite(policy, suite, workers=2, **kwargs).to_dict()
    sharded = evaluate_suite(policy, suite, workers=2, ray_address="auto", **kwargs).to_dict()
    assert local == sharded and len(sharded["results"]) == 4


def test_cli_train_on_ray_says_where_its_workers_run(cluster, tmp_path, capsys):
    argv = ["train", "--robot", "panda", "--task", "reach", "--out", str(tmp_path / "run"), "--iterations", "1"]
    assert main([*argv, "--workers", "2", "--envs-per-worker", "2", "--no-progress", "--ray=auto"]) == 0
    out = capsys.readouterr().out
    assert "4 envs over 2 Ray actors (the Ray cluster at auto)" in out
    assert load_checkpoint(tmp_path / "run" / "model_1.pt")["training_config"]["num_envs"] == 4
    assert main([*argv, "--num-envs", "4", "--envs-per-worker", "2"]) == 2
    assert "--envs-per-worker M gives num_envs = workers x M" in capsys.readouterr().err
