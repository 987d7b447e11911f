"""Symmetric training: rsl_rl's symmetry extension fed with the task's own mirrors.

A mirror-symmetric robot (a ``mirror:`` section in its profile) in a mirror-symmetric task
can learn from the mirror image of every sample too (:mod:`sim2real.core.mirror`). The
training config's ``symmetry`` section switches it on:

- ``augmentation: true``: every PPO mini-batch also holds its mirrored observations and
  actions, with the same advantages and returns (rsl_rl ``use_data_augmentation``). The
  update costs about twice as much; the samples cost nothing.
- ``mirror_loss_coef: c > 0``: adds c * MSE(pi(mirror(s)), mirror(pi(s))), pulling the
  policy towards one that commutes with the mirror (rsl_rl ``use_mirror_loss``).

The mirrors come from the env (``RobotTaskEnv.mirrors``), where the observation spec and
the profile's twins define them, and are checked there against real physics
(tests/unit/test_symmetry.py). The deployed policy and its observation contract do not
change. rsl_rl updates the observation normalizers from the collected samples only, so the
mirrored inputs are scaled by statistics of the unmirrored ones: for the Go2 these are
nearly mirror-symmetric anyway (the commands, the terrain and the start poses are drawn
symmetrically).
"""

from __future__ import annotations

from typing import Any, Mapping

from sim2real.core.mirror import SignedPermutation


def env_mirrors(env: Any) -> dict[str, SignedPermutation] | str:
    """An env's mirrors, or why it has none (for a worker's env:
    ``ProcessVecEnv.run_on_first(env_mirrors)``; an exception there would end the workers)."""
    try:
        return env.mirrors()
    except ValueError as exc:
        return str(exc)


class MirrorAugmentation:
    """rsl_rl's ``data_augmentation_func``: ``(obs, actions)`` -> the originals followed by
    their mirror images (either may be None, and stays None)."""

    def __init__(self, mirrors: Mapping[str, SignedPermutation]):
        self._groups = {name: mirror.as_torch() for name, mirror in mirrors.items() if name != "action"}
        self._action = mirrors["action"].as_torch()

    def __call__(self, env: Any = None, obs: Any = None, actions: Any = None) -> tuple[Any, Any]:
        import torch
        from tensordict import TensorDict

        mirrored_obs = None
        if obs is not None:
            groups = {}
            for name in obs.keys():
                if name not in self._groups:
                    raise KeyError(f"no mirror for observation group {name!r} (mirrors: {sorted(self._groups)})")
                index, sign = self._groups[name]
                values = obs[name]
                groups[name] = torch.cat([values, values[..., index] * sign])
            mirrored_obs = TensorDict(groups, batch_size=[2 * obs.batch_size[0]])
        mirrored_actions = None
        if actions is not None:
            index, sign = self._action
            mirrored_actions = torch.cat([actions, actions[..., index] * sign])
        return mirrored_obs, mirrored_actions


def symmetry_cfg(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """rsl_rl's ``symmetry_cfg`` for the training config's ``symmetry`` section, as plain
    data (None: off). The runner adds ``data_augmentation_func``, a :class:`MirrorAugmentation`
    of the task's mirrors, to the copy rsl_rl gets."""
    coef = float(settings.get("mirror_loss_coef", 0.0))
    augmentation = bool(settings.get("augmentation", False))
    if not augmentation and coef == 0.0:
        return None
    return {"use_data_augmentation": augmentation, "use_mirror_loss": coef > 0.0, "mirror_loss_coeff": coef}


def log_mirror_loss_without_gradients(symmetry: Any) -> None:
    """rsl_rl computes the mirror loss on every mini-batch even when it only logs it (no
    mirror loss, augmentation alone), building an autograd graph it then detaches: with no
    gradients the logged value is the same and the update ~10 % cheaper."""
    if symmetry.use_mirror_loss:
        return
    import torch

    compute = symmetry.compute_loss

    def compute_without_gradients(*args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return compute(*args, **kwargs)

    symmetry.compute_loss = compute_without_gradients
