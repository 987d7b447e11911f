"""A fine-tune that starts from a deployed policy file (``.onnx``) instead of a checkpoint.

The policy file is what travels: it is shipped, copied to robots and kept when the
training run's folder is long gone. It holds the whole deterministic actor (observation
normalizer and MLP, ``sim2real export``) but not the critic, the action noise or the
optimizer. So a warm start from it loads the actor and starts those afresh: the critic
from the config's initialisation (train it alone first: ``critic_warmup.iterations``),
the action noise at ``policy.init_noise_std``, a new optimizer.

The weights are read from the graph the exporter writes (rsl_rl ``MLPModel.as_onnx``)::

    obs -> Sub(mean) -> Div(std + eps) -> [Gemm(W, b, transB=1) -> Elu] x k -> Gemm -> actions

Anything else (a graph from another exporter, other layer sizes than the config's
``policy.actor_hidden_dims``) is refused with the reason and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sim2real.train.checkpoint import FORMAT, CheckpointError, source_revision

#: rsl_rl's EmpiricalNormalization divides by ``std + eps`` with this eps; the graph holds the sum.
NORMALIZER_EPS = 1e-2
_ACTIVATIONS = {"Elu": "elu", "Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}


def _mlp_layers(
    path: Path, nodes: list, constant: Callable[[str], np.ndarray], refuse: str
) -> tuple[list[tuple[np.ndarray, np.ndarray]], set[str]]:
    """The (weight, bias) of each Gemm after the normalizer, and the activations between them."""
    import onnx

    layers: list[tuple[np.ndarray, np.ndarray]] = []
    activations: set[str] = set()
    for node in nodes:
        if node.op_type == "Gemm":
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if (
                attributes.get("transB", 0) != 1
                or attributes.get("transA", 0) != 0
                or attributes.get("alpha", 1.0) != 1.0
                or attributes.get("beta", 1.0) != 1.0
            ):
                raise CheckpointError(
                    path, f"layer {len(layers)} is a Gemm with {attributes}", refuse.format("unexpected Gemm form")
                )
            layers.append((constant(node.input[1]), constant(node.input[2])))
        elif node.op_type in _ACTIVATIONS:
            activations.add(_ACTIVATIONS[node.op_type])
        else:
            raise CheckpointError(path, f"unexpected {node.op_type} node", refuse.format(f"{node.op_type} node"))
    return layers, activations


def actor_from_policy_file(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(actor_state, facts)``: the actor's normalizer and MLP tensors under rsl_rl
    ``MLPModel`` state-dict names (``obs_normalizer._mean/_var/_std``, ``mlp.<i>.weight/bias``;
    no ``count``, no distribution parameters), and what the graph says about the network:
    ``hidden_dims``, ``activation``, ``observation_size``, ``num_actions``."""
    import onnx
    import torch
    from onnx import numpy_helper

    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise CheckpointError(
            path, f"not a readable ONNX file ({exc})", "give a policy written by `sim2real export`"
        ) from exc
    weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    nodes = list(model.graph.node)
    refuse = "this graph is not the one `sim2real export` writes ({}); warm-start from the run's checkpoint instead"

    def constant(name: str) -> np.ndarray:
        if name not in weights:
            raise CheckpointError(
                path, f"graph input {name!r} is not a stored weight", refuse.format("computed weight")
            )
        return np.asarray(weights[name], dtype=np.float32)

    if len(nodes) < 3 or nodes[0].op_type != "Sub" or nodes[1].op_type != "Div":
        raise CheckpointError(
            path,
            "the graph does not start with the observation normalizer (Sub, Div)",
            refuse.format("no normalizer in front"),
        )
    mean = constant(nodes[0].input[1]).reshape(1, -1)
    std = constant(nodes[1].input[1]).reshape(1, -1) - NORMALIZER_EPS
    if not np.all(std >= 0.0):
        raise CheckpointError(
            path, "the normalizer's divisor is below its epsilon", refuse.format("unknown normalizer")
        )
    state: dict[str, Any] = {
        "obs_normalizer._mean": torch.from_numpy(mean.copy()),
        "obs_normalizer._std": torch.from_numpy(std),
        "obs_normalizer._var": torch.from_numpy(std * std),
    }
    layers, activations = _mlp_layers(path, nodes[2:], constant, refuse)
    if not layers or len(activations) > 1:
        raise CheckpointError(path, "no linear layers, or mixed activations", refuse.format("not an MLP"))
    for index, (weight, bias) in enumerate(layers):
        # rsl_rl's MLP is Sequential(Linear, act, Linear, act, ..., Linear): Linear i sits at 2 * i.
        state[f"mlp.{2 * index}.weight"] = torch.from_numpy(weight.copy())
        state[f"mlp.{2 * index}.bias"] = torch.from_numpy(bias.copy())
    bad = [name for name, tensor in state.items() if not torch.isfinite(tensor).all()]
    if bad:
        raise CheckpointError(path, f"non-finite weights in {bad}", "warm-start from another policy file")
    facts = {
        "hidden_dims": [int(w.shape[0]) for w, _ in layers[:-1]],
        "activation": activations.pop() if activations else None,
        "observation_size": int(mean.shape[1]),
        "num_actions": int(layers[-1][0].shape[0]),
    }
    return state, facts


def policy_iteration(meta) -> int:
    """The training iteration a policy file was exported at (0 when its metadata does not say)."""
    found = re.search(r"iteration (\d+)", meta.checkpoint or "")
    return int(found.group(1)) if found else 0


def warm_start_from_policy(path: str | Path, config: dict[str, Any]) -> dict[str, Any]:
    """A warm-start checkpoint (:func:`sim2real.train.checkpoint.warm_start`'s shape) from a
    policy file: its actor, no critic or optimizer state (``None``: the runner starts them
    afresh), the iteration the file was exported at (counting goes on from there), the
    file's task interface. The config must train the same robot and task with the file's
    actor layer sizes and activation."""
    from sim2real.core.policy_file import PolicyFileError, load_policy
    from sim2real.train.train_config import rsl_rl_config

    path = Path(path)
    try:
        policy = load_policy(path)
    except PolicyFileError as exc:
        raise CheckpointError(path, str(exc).split(": ", 1)[-1], "give a policy written by `sim2real export`") from None
    meta = policy.metadata
    if (meta.robot, meta.task) != (config["robot"], config["task"]):
        raise CheckpointError(
            path,
            f"it is a {meta.robot} {meta.task} policy and the config trains {config['robot']} {config['task']}",
            "warm-start from a policy of the same robot and task",
        )
    state, facts = actor_from_policy_file(path)
    wanted = config["policy"]
    if facts["hidden_dims"] != list(wanted["actor_hidden_dims"]) or (
        facts["activation"] is not None and facts["activation"] != wanted["activation"]
    ):
        raise CheckpointError(
            path,
            f"its actor is {facts['hidden_dims']} {facts['activation']} and the config asks "
            f"{wanted['actor_hidden_dims']} {wanted['activation']}",
            f"set policy.actor_hidden_dims: {facts['hidden_dims']} and policy.activation: "
            f"{facts['activation']} in the config",
        )
    if not wanted["obs_normalization"]:
        raise CheckpointError(
            path,
            "the file normalizes its observations and the config has policy.obs_normalization: false",
            "set policy.obs_normalization: true",
        )
    iteration = policy_iteration(meta)
    trained = meta.training_config or {}
    # The normalizer's weight against new samples: as many as the run that made the file saw.
    samples = iteration * int(trained.get("num_envs", 1)) * int(trained.get("num_steps_per_env", 1))
    import torch

    state["obs_normalizer.count"] = torch.tensor(max(samples, 1), dtype=torch.long)
    # What the runner checks against the task env it builds (it then stores that env's own interface).
    interface = {
        "robot": meta.robot,
        "task": meta.task,
        "joint_names": list(meta.joint_names),
        "observation_terms": meta.observation_spec.to_metadata(),
        "observation_size": int(meta.observation_size),
    }
    return {
        "format": FORMAT,
        "actor_state_dict": state,
        "critic_state_dict": None,
        "optimizer_state_dict": None,
        "iteration": iteration,
        "iter": iteration,
        "infos": None,
        "robot": meta.robot,
        "task": meta.task,
        "training_config": config,
        "rsl_rl_config": rsl_rl_config(config),
        "interface": interface,
        "randomization": None,
        "adr": None,
        "curriculum": None,
        "source": source_revision(),
        "torch_rng": None,
        "warm_start": {"from": str(path), "iteration": iteration, "policy_sha256": policy.sha256},
    }
