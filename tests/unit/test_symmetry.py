"""Left-right mirrors: the signed permutations, the profile's twins, and the one claim that
matters for training, checked on real physics: the mirror image of a Go2 episode, driven
by the mirrored actions, observes the mirrored observations."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from sim2real.core.mirror import SignedPermutation
from sim2real.core.robot_profile import ProfileError, load_profile
from sim2real.train.tasks import make_env

GO2 = load_profile("go2")


def test_a_signed_permutation_maps_and_is_checked():
    p = SignedPermutation([1, 0, 2], [1, 1, -1])
    assert p(np.array([1.0, 2.0, 3.0])).tolist() == [2.0, 1.0, -3.0]
    assert p(np.arange(6.0).reshape(2, 3)).tolist() == [[1, 0, -2], [4, 3, -5]]
    assert p.is_involution()
    assert not SignedPermutation([1, 2, 0], [1, 1, 1]).is_involution()
    assert SignedPermutation.concatenate([p, SignedPermutation.of_vector("axial")]) == SignedPermutation(
        [1, 0, 2, 3, 4, 5], [1, 1, -1, -1, 1, -1]
    )
    with pytest.raises(ValueError, match="not a permutation"):
        SignedPermutation([0, 0], [1, 1])
    with pytest.raises(ValueError, match="signs must be"):
        SignedPermutation([0, 1], [1, 0.5])
    with pytest.raises(ValueError, match="unknown vector kind"):
        SignedPermutation.of_vector("spinor")


def test_go2_twins_swap_left_and_right_and_flip_the_hips():
    joints, feet = GO2.mirror.joints, GO2.mirror.feet
    names = GO2.joint_names
    assert [names[i] for i in joints.index[:3]] == ["FR_hip_joint", "FR_thigh_joint", "FR_calf_joint"]
    assert joints.sign.tolist() == [-1, 1, 1] * 4
    assert [GO2.foot_links[i] for i in feet.index] == ["FR_foot", "FL_foot", "RR_foot", "RL_foot"]
    assert joints.is_involution() and feet.is_involution()
    assert np.allclose(joints(GO2.default_positions), GO2.default_positions)  # the standing pose is symmetric
    assert load_profile("panda").mirror is None


def _profile_with(tmp_path, edit):
    data = yaml.safe_load(GO2.source.read_text())
    data["urdf"] = str(GO2.urdf)
    edit(data)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "edit, field, words",
    [
        (lambda d: d["mirror"]["joints"].pop(), "mirror.joints", "without a twin: ['RL_calf_joint', 'RR_calf_joint']"),
        (lambda d: d["mirror"]["joints"][0].__setitem__(2, 1), "mirror.joints[0]", "mirror image of FL_hip_joint"),
        (lambda d: d["mirror"]["joints"][0].__setitem__(2, 0), "mirror.joints[0]", "sign +1 or -1"),
        (lambda d: d["mirror"]["joints"][1].__setitem__(1, "FL_hip_joint"), "mirror.joints[1]", "in two pairs"),
        (lambda d: d["mirror"]["joints"][1].__setitem__(1, "FR_knee"), "mirror.joints[1]", "not a joint"),
        (lambda d: d["joints"][4].__setitem__("kp", 25.0), "mirror.joints[1]", "FR_thigh_joint's kp is 25.0"),
        (lambda d: d["mirror"]["feet"].pop(), "mirror.feet", "without a twin: ['RL_foot', 'RR_foot']"),
        (lambda d: d["mirror"]["feet"].append(["FL_foot", "RR_foot"]), "mirror.feet[2]", "repeats a foot"),
    ],
)
def test_a_profile_whose_twins_are_not_mirror_images_is_refused_by_field(tmp_path, edit, field, words):
    with pytest.raises(ProfileError) as error:
        load_profile(_profile_with(tmp_path, edit))
    assert field in str(error.value) and words in str(error.value)


@pytest.mark.parametrize(
    "robot, task, config, words",
    [
        ("panda", "reach", None, "no left-right twins: add a mirror: section"),
        # Twin feet a third of a cycle apart: the mirror image of this gait is another gait.
        (
            "go2",
            "walk",
            {"gait": {"frequency": 2.0, "offsets": [0.0, 0.3, 0.5, 0.8], "stance": 0.5}},
            "not all the same phase apart",
        ),
    ],
    ids=["robot-without-twins", "asymmetric-gait"],
)
def test_a_task_that_has_no_mirror_image_says_why(robot, task, config, words):
    env = make_env(robot, task, config=config)
    try:
        with pytest.raises(ValueError, match=words):
            env.mirrors()
    finally:
        env.close()


def test_a_task_whose_mirror_hooks_do_not_fit_its_vectors_is_refused():
    from sim2real.train.envs.base import RobotTaskEnv
    from sim2real.train.symmetry import env_mirrors

    env = make_env("go2", "walk")
    try:
        env._privileged_state_mirror = lambda: SignedPermutation.identity(3)  # the true state has 39 values
        with pytest.raises(ValueError, match=r"the privileged mirror maps 16 values \(the privileged vector has 52\)"):
            env.mirrors()
        # A task with a privileged state that never says how it mirrors: the base hook refuses,
        # in the words the runner reports (no traceback out of a worker).
        env._privileged_state_mirror = RobotTaskEnv._privileged_state_mirror.__get__(env)
        assert env_mirrors(env).startswith("Go2WalkEnv has a privileged state but no mirror of it")
    finally:
        env.close()


def test_the_mirror_image_of_a_go2_episode_observes_the_mirrored_observations():
    """Episode A as drawn; episode B its mirror image: the mirrored start pose, the mirrored
    command, the gait clock half a cycle on (a trot's twin feet are half a cycle apart), and
    at every step the mirrored action. Real PyBullet physics on flat ground, no noise: B's
    observations and privileged observations must be A's mirrored, step after step."""
    a, b = make_env("go2", "walk", seed=0), make_env("go2", "walk", seed=0)
    try:
        mirrors = a.mirrors()
        for p in mirrors.values():
            assert p.is_involution()
        assert len(mirrors["policy"]) == a.observation_space.shape[0]
        assert len(mirrors["privileged"]) == len(a.privileged_names())
        joints = mirrors["action"]
        start = b._initial_joint_positions
        b._initial_joint_positions = lambda rng: joints(np.asarray(start(rng)))  # same draws, mirrored pose
        command = np.array([0.4, 0.15, 0.3])
        a.set_fixed_command(command)
        b.set_fixed_command(SignedPermutation.of_vector("command")(command))
        obs_a, _ = a.reset(seed=3)
        b.reset(seed=3)
        b._clock.phase = (a._clock.phase + 0.5) % 1.0
        obs_b = b._observe()
        assert not np.allclose(obs_a, obs_b, atol=0.05)  # the two episodes differ...
        np.testing.assert_allclose(obs_b, mirrors["policy"](obs_a), atol=1e-5)  # ...by the mirror
        rng = np.random.default_rng(0)
        worst = 0.0
        for step in range(50):  # 1 s; random actions tumble the robot later, and chaos takes over
            action = rng.normal(0.0, 0.5, 12).astype(np.float32)
            obs_a, *_ = a.step(action)
            obs_b, *_ = b.step(joints(action).astype(np.float32))
            worst = max(worst, float(np.abs(obs_b - mirrors["policy"](obs_a)).max()))
            np.testing.assert_allclose(
                b.privileged_observation(),
                mirrors["privileged"](a.privileged_observation()),
                atol=1e-3,
                err_msg=f"privileged, step {step}",
            )
        assert worst < 1e-3, worst  # measured: 3e-5 after 50 steps (float32 observations)
    finally:
        a.close()
        b.close()


def test_the_augmentation_appends_the_mirror_images_of_observations_and_actions():
    import torch
    from tensordict import TensorDict

    from sim2real.train.symmetry import MirrorAugmentation

    mirrors = {
        "policy": SignedPermutation([1, 0, 2], [1, 1, -1]),
        "privileged": SignedPermutation([0], [-1]),
        "action": SignedPermutation([1, 0], [-1, -1]),
    }
    augment = MirrorAugmentation(mirrors)
    obs = TensorDict(
        {"policy": torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), "privileged": torch.tensor([[7.0], [8.0]])},
        batch_size=[2],
    )
    actions = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    both, both_actions = augment(env=None, obs=obs, actions=actions)
    assert both.batch_size[0] == 4
    assert both["policy"].tolist() == [[1, 2, 3], [4, 5, 6], [2, 1, -3], [5, 4, -6]]
    assert both["privileged"].tolist() == [[7], [8], [-7], [-8]]
    assert torch.allclose(both_actions, torch.tensor([[0.1, 0.2], [0.3, 0.4], [-0.2, -0.1], [-0.4, -0.3]]))
    assert augment(env=None, obs=None, actions=actions)[0] is None
    assert augment(env=None, obs=obs, actions=None)[1] is None
    with pytest.raises(KeyError, match="no mirror for observation group 'height_scan'"):
        augment(env=None, obs=TensorDict({"height_scan": torch.zeros(2, 1)}, batch_size=[2]))


def _short_go2_config(tmp_path, symmetry: str, robot: str = "go2", task: str = "walk"):
    from sim2real.train.train_config import load_train_config

    path = tmp_path / "config.yaml"
    path.write_text(
        f"iterations: 2\nnum_envs: 4\nnum_steps_per_env: 8\nsave_interval: 1\n"
        f"critic_observation: privileged\nsymmetry: {symmetry}\n"
        "policy: {actor_hidden_dims: [32], critic_hidden_dims: [32]}\n"
    )
    return load_train_config(robot, task, path)


@pytest.mark.parametrize(
    "symmetry, mirror_loss",
    [("{augmentation: true}", False), ("{augmentation: true, mirror_loss_coef: 1.0}", True)],
    ids=["augmentation (the shipped recipe)", "augmentation and mirror loss"],
)
def test_go2_trains_on_its_mirror_images_too(tmp_path, symmetry, mirror_loss):
    """A real Go2 run, privileged critic included: rsl_rl takes the task's mirrors and logs
    the mirror loss every iteration."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sim2real.train.checkpoint import load_checkpoint
    from sim2real.train.runner import Trainer

    result = Trainer(_short_go2_config(tmp_path, symmetry), tmp_path / "run", progress=False).run()
    assert result.iterations == 2
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0}).Reload()
    losses = [e.value for e in events.Scalars("Loss/symmetry")]
    assert len(losses) == 2 and all(np.isfinite(losses)) and losses[0] > 0
    # The checkpoint stays plain data (it loads weights-only): the settings, not the function.
    checkpoint = load_checkpoint(result.checkpoint)
    assert checkpoint["rsl_rl_config"]["algorithm"]["symmetry_cfg"] == {
        "use_data_augmentation": True,
        "use_mirror_loss": mirror_loss,
        "mirror_loss_coeff": float(mirror_loss),
    }


def test_a_mirror_loss_only_logged_is_computed_without_gradients():
    """With augmentation alone rsl_rl still computes the mirror loss on every mini-batch, for
    its log: the same value, without an autograd graph."""
    import torch

    from sim2real.train.symmetry import log_mirror_loss_without_gradients

    weight = torch.ones(1, requires_grad=True)
    for used, wants_grad in ((False, False), (True, True)):
        symmetry = SimpleNamespace(use_mirror_loss=used, compute_loss=lambda x: (weight * x).sum())
        log_mirror_loss_without_gradients(symmetry)
        loss = symmetry.compute_loss(torch.tensor([2.0]))
        assert loss.item() == 2.0 and loss.requires_grad == wants_grad


def test_a_run_without_symmetry_logs_no_mirror_loss(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sim2real.train.runner import Trainer

    Trainer(_short_go2_config(tmp_path, "{augmentation: false}"), tmp_path / "run", progress=False).run()
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0}).Reload()
    assert "Loss/symmetry" not in events.Tags()["scalars"]


def test_symmetry_on_a_robot_without_twins_stops_the_run_with_the_fix(tmp_path):
    from sim2real.train.runner import Trainer, TrainingError

    config = _short_go2_config(tmp_path, "{augmentation: true}", robot="panda", task="reach")
    config["critic_observation"] = "policy"
    with pytest.raises(
        TrainingError,
        match="cannot mirror this task: panda has no left-right twins: add a mirror: section to .*panda.yaml",
    ):
        Trainer(config, tmp_path / "run", progress=False).run()
