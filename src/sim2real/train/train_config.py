"""Training configs: ``config/train/<robot>_<task>.yaml`` over built-in defaults.

Precedence: :data:`DEFAULTS` < the YAML file < command-line overrides. Every section
and key is checked, so a typo fails the run before any env starts, with the file, the
field and the fix (:class:`TrainConfigError`). Commented example:
``config/train/go2_walk.yaml``, the shipped Go2 recipe.

A file may start from another with ``extends: FILE`` (a path relative to the file, or the
name of a file in ``config/train/`` without ``.yaml``) and give only what differs: mappings
merge key by key (``task_config`` and ``curriculum`` included; a mapping with another ``kind``,
e.g. a linear curriculum for an automatic one, replaces the parent's), anything else replaces.

The PPO defaults are chosen for CPU training: a fixed learning rate of 3e-4 (rsl_rl's
KL-adaptive schedule collapsed the learning rate on the Panda reach task here), and
few, large mini-batches because a CPU learner pays per mini-batch.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Mapping

import yaml

from sim2real.core.errors import InputError
from sim2real.core.paths import share_dir

DEFAULTS: dict[str, Any] = {
    "robot": None,
    "task": None,
    "seed": 0,
    "iterations": 300,
    "num_envs": 16,
    "workers": 2,
    # A worker steps its envs together where the task can be (the Go2 walk: the same physics bit
    # for bit, 1.27-1.40x the rollout speed, sim2real.train.envs.go2_walk_batch), one at a time
    # otherwise (another task, a reward prior) or when false. Local workers only (not --ray).
    "batched_envs": True,
    "num_steps_per_env": 24,
    "save_interval": 50,
    # Curriculum and ADR decide from at least this many episodes finished since their last update.
    "min_episodes_per_update": 16,
    "task_config": {},
    "randomization": None,
    "adr": {
        "enabled": False,
        "target_return": 0.0,
        "rate": 0.1,
        "widen_above": 0.1,
        "narrow_below": 0.2,
        "parameters": None,
        "warmup_iterations": 0,
    },
    "curriculum": None,
    # Reward shaping from prior knowledge (sim2real.train.prior): r_total = r_env + lambda * r_prior.
    # spec: a prior YAML (a path, or a name in config/priors/); lambda runs linearly from `lambda`
    # to `lambda_final` at iteration `lambda_final_iteration` (from the end of any critic
    # warm-up) and holds there; without a final it stays `lambda`.
    "prior": {"spec": None, "lambda": 1.0, "lambda_final": None, "lambda_final_iteration": None},
    # System-in-the-loop training (sim2real.train.auxiliary): L = L_PPO + beta * L_BC, the actor
    # cloning the actions demonstrated in robot bags. buffer: a bag, a failure bundle or a folder
    # of them, read again between iterations (new bags join the run); demonstrations: policy (the
    # runtime's commands of a supervised run) or teleop (an operator's in TAKEOVER);
    # recorded_policy: the policy file that ran while recording, for the gait clock's phase (a
    # failure bundle names its own). beta runs like the prior's lambda.
    "behaviour_cloning": {
        "buffer": None,
        "demonstrations": "policy",
        "recorded_policy": None,
        "beta": 1.0,
        "beta_final": None,
        "beta_final_iteration": None,
        "batch_size": 256,
    },
    # Domain adaptation on robot data (sim2real.train.domain_adaptation, DANN): a classifier
    # tells the actor's features of simulated observations from those of the robot's (bags, as
    # for behaviour_cloning: observations only), through a gradient-reversal layer of weight
    # lambda on the actor. schedule: dann (0 up to `lambda` over the run, as in the DANN paper)
    # or fixed. shared_terms: observation terms an operator chooses (commands, goals); the
    # classifier sees the simulated sample's in both domains, so it cannot tell them apart by
    # what the robot was asked to do. (The arm's goal_offset stays the robot's: it also holds
    # where the hand is.)
    "domain_adaptation": {
        "bags": None,
        "recorded_policy": None,
        "lambda": 0.1,
        "schedule": "dann",
        "batch_size": 256,
        "classifier_learning_rate": 1.0e-3,
        "shared_terms": ["velocity_command", "goal_position"],
    },
    # Learn from the mirror image of every sample too (train/symmetry.py): needs a robot with a
    # mirror: section in its profile. augmentation doubles each PPO mini-batch with mirrored
    # samples; mirror_loss_coef > 0 adds rsl_rl's mirror loss.
    "symmetry": {"augmentation": False, "mirror_loss_coef": 0.0},
    # What the critic sees: "policy" (the actor's observation) or "privileged" (that plus
    # simulator truth: true velocities, contacts, the episode's physical conditions).
    "critic_observation": "policy",
    # Iterations at the start of a run (or of a warm start) that train the critic alone, the
    # actor frozen, at their own learning rate: a fresh critic's advantages would otherwise
    # pull a trained actor around.
    "critic_warmup": {"iterations": 0, "learning_rate": 1.0e-3},
    "policy": {
        "actor_hidden_dims": [256, 128, 64],
        "critic_hidden_dims": [256, 128, 64],
        "activation": "elu",
        "init_noise_std": 1.0,
        "obs_normalization": True,
    },
    # schedule: fixed | adaptive (rsl_rl's KL-driven rate) | linear (from learning_rate down to
    # learning_rate_final at iteration learning_rate_final_iteration, by default the run's end,
    # `iterations`, and held after it; the line starts at the end of any critic warm-up). A
    # final iteration past the run's end stops a run part-way down a longer line: the same
    # rates, iteration for iteration, as the longer run up to there (the same weights too
    # unless something else follows `iterations`, e.g. a linear curriculum's default length).
    "ppo": {
        "learning_rate": 3.0e-4,
        "schedule": "fixed",
        "learning_rate_final": None,
        "learning_rate_final_iteration": None,
        "desired_kl": 0.01,
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "clip_param": 0.2,
        "gamma": 0.99,
        "lam": 0.95,
        "value_loss_coef": 1.0,
        "entropy_coef": 0.005,
        "max_grad_norm": 1.0,
    },
}
# Sections whose content another module validates (make_env, make_curriculum).
_FREE_FORM = ("task_config", "curriculum")
_INTEGERS = {
    "seed": 0,
    "iterations": 1,
    "num_envs": 1,
    "workers": 1,
    "num_steps_per_env": 1,
    "save_interval": 1,
    "min_episodes_per_update": 1,
    "ppo.num_learning_epochs": 1,
    "ppo.num_mini_batches": 1,
    "adr.warmup_iterations": 0,
    "critic_warmup.iterations": 0,
}
_POSITIVE = (
    "critic_warmup.learning_rate",
    "ppo.learning_rate",
    "ppo.clip_param",
    "ppo.max_grad_norm",
    "policy.init_noise_std",
    "adr.rate",
)
_EXAMPLE = "config/train/go2_walk.yaml"


class TrainConfigError(InputError):
    def __init__(self, source: str | Path, field: str, problem: str, fix: str):
        self.source, self.field = str(source), field
        super().__init__(f"{source}: {field}: {problem}. Fix: {fix}")


def config_path(robot: str, task: str) -> Path:
    return share_dir() / "config" / "train" / f"{robot}_{task}.yaml"


def available_configs() -> list[str]:
    return sorted(p.stem for p in (share_dir() / "config" / "train").glob("*.yaml"))


def load_train_config(
    robot: str | None, task: str | None, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resolved config for ``robot``/``task``: defaults, then ``path`` (default:
    ``config/train/<robot>_<task>.yaml``), then ``overrides`` (dotted keys allowed:
    ``{"ppo.learning_rate": 1e-3}``; None values are ignored). ``robot`` or ``task`` None:
    the file's (a config that names them needs nothing else)."""
    if path is None and (robot is None or task is None):
        raise TrainConfigError(
            "(no file)",
            "robot" if robot is None else "task",
            "not given",
            "give --robot and --task, or --config FILE naming them",
        )
    source = Path(path) if path is not None else config_path(robot, task)
    if not source.is_file():
        raise TrainConfigError(
            source,
            "(file)",
            "not found",
            f"give --config FILE, or use a robot/task with a config ({available_configs()})",
        )
    data: dict[str, Any] = {}
    for layer, layer_data in _extends_chain(source):
        _merge(copy.deepcopy(DEFAULTS), layer_data, layer, "")  # each file's own fields, named by that file
        _deep_update(data, layer_data)
    config = copy.deepcopy(DEFAULTS)
    _merge(config, data, source, "")
    for key, value in (overrides or {}).items():
        if value is not None:
            _merge(config, _nest(key, value), "command line", "")
    for key, expected in (("robot", robot), ("task", task)):
        if expected is None:
            if config[key] is None:
                raise TrainConfigError(
                    source,
                    key,
                    "not set, and not given on the command line",
                    f"add `{key}: ...` to the file or pass --{key}",
                )
        elif config[key] is None:
            config[key] = expected
        elif config[key] != expected:
            raise TrainConfigError(
                source,
                key,
                f"the file is for {key} {config[key]!r}, not {expected!r}",
                f"use --{key} {config[key]} or another --config",
            )
    _validate(config, source)
    return config


def override_config(
    config: Mapping[str, Any], overrides: Mapping[str, Any] | None, source: str | Path = "command line"
) -> dict[str, Any]:
    """A resolved config (e.g. a checkpoint's) with ``overrides`` applied and checked again."""
    result = copy.deepcopy(dict(config))
    for key, default in DEFAULTS.items():  # a config saved before the key (or a section's key) existed
        result.setdefault(key, copy.deepcopy(default))
        if isinstance(default, dict) and key not in _FREE_FORM and isinstance(result[key], dict):
            for inner, value in default.items():
                result[key].setdefault(inner, copy.deepcopy(value))
    for key, value in (overrides or {}).items():
        if value is not None:
            _merge(result, _nest(key, value), source, "")
    _validate(result, source)
    return result


def _read(source: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TrainConfigError(source, "(file)", f"not valid YAML ({exc})", "correct the YAML syntax") from None
    if not isinstance(data, dict):
        raise TrainConfigError(source, "(file)", "expected a mapping", f"see {_EXAMPLE}")
    return data


def _extends_chain(source: Path) -> list[tuple[Path, dict[str, Any]]]:
    """``source`` and the files it extends, the first ancestor first; each without ``extends``."""
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    while True:
        if source.resolve() in seen:
            cycle = " -> ".join(str(p) for p in [*seen, source.resolve()])
            raise TrainConfigError(source, "extends", f"a cycle ({cycle})", "make one file the root, without extends")
        seen.append(source.resolve())
        data = _read(source)
        parent = data.pop("extends", None)
        chain.append((source, data))
        if parent is None:
            return chain[::-1]
        if not isinstance(parent, str) or not parent.strip():
            raise TrainConfigError(
                source,
                "extends",
                f"expected a file, got {parent!r}",
                "write e.g. extends: go2_walk (config/train/go2_walk.yaml) or a relative path",
            )
        named = "/" not in parent and not parent.endswith((".yaml", ".yml"))
        parent_path = share_dir() / "config" / "train" / f"{parent}.yaml" if named else source.parent / parent
        if not parent_path.is_file():
            raise TrainConfigError(
                source,
                "extends",
                f"{parent_path} not found",
                f"name a file in config/train ({available_configs()}) or a path relative to {source.parent}",
            )
        source = parent_path


def _deep_update(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        other_kind = (
            isinstance(value, Mapping)
            and "kind" in value
            and isinstance(into.get(key), dict)
            and value["kind"] != into[key].get("kind")
        )  # e.g. another curriculum: the old one's keys mean nothing
        if isinstance(value, Mapping) and isinstance(into.get(key), dict) and not other_kind:
            _deep_update(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    return {head: _nest(rest, value) if rest else value}


def _merge(into: dict[str, Any], data: Mapping[str, Any], source: str | Path, prefix: str) -> None:
    for key, value in data.items():
        field = f"{prefix}{key}"
        if key not in into:
            allowed = sorted(into)
            raise TrainConfigError(source, field, "unknown field", f"remove it or use one of {allowed}")
        if isinstance(into[key], dict) and key not in _FREE_FORM and prefix == "":
            if not isinstance(value, dict):
                raise TrainConfigError(source, field, f"expected a mapping, got {value!r}", f"see {_EXAMPLE}")
            _merge(into[key], value, source, f"{field}.")
        else:
            into[key] = copy.deepcopy(value)


def _validate(config: dict[str, Any], source: str | Path) -> None:
    """Every value of a resolved training config, in the order a reader meets them; the first
    problem raises with its field and the fix."""
    _validate_numbers(config, source)
    _validate_schedule(config, source)
    _validate_structure(config, source)
    _validate_task_config(config, source)
    _validate_prior(config, source)
    _validate_behaviour_cloning(config, source)
    _validate_domain_adaptation(config, source)
    _validate_run_shape(config, source)


def _validate_numbers(config: dict[str, Any], source: str | Path) -> None:
    def get(field: str) -> Any:
        value: Any = config
        for part in field.split("."):
            value = value[part]
        return value

    for field, minimum in _INTEGERS.items():
        value = get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise TrainConfigError(
                source, field, f"expected an integer >= {minimum}, got {value!r}", "write a whole number"
            )
    for section in ("ppo", "policy", "adr"):
        for key, value in config[section].items():
            if (
                key in ("parameters", "activation", "schedule", "enabled")
                or key.endswith("hidden_dims")
                or key == "obs_normalization"
                or (key.startswith("learning_rate_final") and value is None)
            ):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise TrainConfigError(
                    source, f"{section}.{key}", f"expected a finite number, got {value!r}", "write a number"
                )
    for field in _POSITIVE:
        if get(field) <= 0:
            raise TrainConfigError(source, field, f"must be > 0, got {get(field)}", "use a positive value")


def _validate_schedule(config: dict[str, Any], source: str | Path) -> None:
    """The critic's inputs and the learning-rate schedule."""
    if config["critic_observation"] not in ("policy", "privileged"):
        raise TrainConfigError(
            source,
            "critic_observation",
            f"unknown value {config['critic_observation']!r}",
            "use policy (the critic sees what the actor sees) or privileged (plus "
            "simulator truth; the deployed actor is unchanged)",
        )
    if config["ppo"]["schedule"] not in ("fixed", "adaptive", "linear"):
        raise TrainConfigError(
            source,
            "ppo.schedule",
            f"unknown schedule {config['ppo']['schedule']!r}",
            "use fixed (CPU default), adaptive (KL-driven) or linear (decay to ppo.learning_rate_final)",
        )
    final = config["ppo"]["learning_rate_final"]
    if config["ppo"]["schedule"] == "linear" and (final is None or not 0 < final <= config["ppo"]["learning_rate"]):
        raise TrainConfigError(
            source,
            "ppo.learning_rate_final",
            f"the linear schedule needs a final rate in (0, learning_rate], got {final!r}",
            "write e.g. learning_rate_final: 3.0e-5",
        )
    if config["ppo"]["schedule"] != "linear" and final is not None:
        raise TrainConfigError(
            source,
            "ppo.learning_rate_final",
            "only the linear schedule uses a final rate",
            "set ppo.schedule: linear, or remove learning_rate_final",
        )
    final_iteration = config["ppo"]["learning_rate_final_iteration"]
    if final_iteration is not None:
        if isinstance(final_iteration, bool) or not isinstance(final_iteration, int) or final_iteration < 1:
            raise TrainConfigError(
                source,
                "ppo.learning_rate_final_iteration",
                f"expected an iteration (a whole number >= 1), got {final_iteration!r}",
                "write e.g. learning_rate_final_iteration: 2400, or remove it (the run's end)",
            )
        if config["ppo"]["schedule"] != "linear":
            raise TrainConfigError(
                source,
                "ppo.learning_rate_final_iteration",
                "only the linear schedule has a final iteration",
                "set ppo.schedule: linear, or remove learning_rate_final_iteration",
            )


def _validate_structure(config: dict[str, Any], source: str | Path) -> None:
    """The networks' layers, the ADR and symmetry switches, the task config's shape."""
    for key in ("actor_hidden_dims", "critic_hidden_dims"):
        dims = config["policy"][key]
        if not isinstance(dims, list) or not dims or not all(isinstance(d, int) and d > 0 for d in dims):
            raise TrainConfigError(
                source, f"policy.{key}", f"expected a list of layer widths, got {dims!r}", "write e.g. [256, 128, 64]"
            )
    if not isinstance(config["adr"]["enabled"], bool):
        raise TrainConfigError(
            source, "adr.enabled", f"expected true or false, got {config['adr']['enabled']!r}", "write true or false"
        )
    if config["adr"]["enabled"] and config["randomization"] is None:
        raise TrainConfigError(
            source,
            "adr.enabled",
            "adaptive DR needs a randomization to adapt",
            "set randomization: <name> or adr.enabled: false",
        )
    if not isinstance(config["batched_envs"], bool):
        raise TrainConfigError(
            source, "batched_envs", f"expected true or false, got {config['batched_envs']!r}", "write true or false"
        )
    if not isinstance(config["symmetry"]["augmentation"], bool):
        raise TrainConfigError(
            source,
            "symmetry.augmentation",
            f"expected true or false, got {config['symmetry']['augmentation']!r}",
            "write true or false",
        )
    coef = config["symmetry"]["mirror_loss_coef"]
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) or coef < 0:
        raise TrainConfigError(
            source, "symmetry.mirror_loss_coef", f"expected a number >= 0, got {coef!r}", "write e.g. 0.0 (off) or 0.1"
        )
    if not isinstance(config["task_config"], dict):
        raise TrainConfigError(source, "task_config", "expected a mapping", "write task_config: {} or a mapping")


def _validate_run_shape(config: dict[str, Any], source: str | Path) -> None:
    """What the curriculum, ADR and the rollout size ask of one another."""
    curriculum = config.get("curriculum") or {}
    line_end = curriculum.get("total_iterations") or config["iterations"]
    if config["adr"]["enabled"] and curriculum.get("kind") == "linear" and line_end >= config["iterations"]:
        # ADR decides only at the curriculum's hardest difficulty (a harder task lowers the return
        # too), which a linear curriculum reaches at its total_iterations: past the run's end.
        raise TrainConfigError(
            source,
            "curriculum.total_iterations",
            f"the linear curriculum reaches d_max at iteration {line_end} and the run ends at "
            f"{config['iterations']}, so ADR (which waits for d_max) would never act",
            f"set curriculum.total_iterations below iterations (e.g. "
            f"{max(1, int(0.7 * config['iterations']))}), or train without adr",
        )
    if config["num_envs"] * config["num_steps_per_env"] < config["ppo"]["num_mini_batches"]:
        raise TrainConfigError(
            source,
            "ppo.num_mini_batches",
            "more mini-batches than samples per iteration",
            "lower num_mini_batches or raise num_envs * num_steps_per_env",
        )


def _validate_task_config(config: dict[str, Any], source: str | Path) -> None:
    """The task_config overrides against the task's declared keys, here in the learner: in a
    worker a typo would end the run with a traceback after its folder was written."""
    from sim2real.train.tasks import TaskConfigError, load_task_config, task_entry

    try:
        task_entry(config["robot"], config["task"])
    except ValueError:
        return  # not a registered task (a test's own env): its maker checks its config
    try:
        load_task_config(config["robot"], config["task"], config["task_config"])
    except TaskConfigError as exc:
        raise TrainConfigError(
            source,
            "task_config",
            str(exc),
            f"correct the key (task_config may only set keys of config/tasks/{config['robot']}_{config['task']}.yaml)",
        ) from None


def _validate_weight_line(section: dict[str, Any], name: str, key: str, source: str | Path) -> None:
    """A weight ``key`` run linearly to ``<key>_final`` at ``<key>_final_iteration``: numbers,
    and the two final fields given together."""
    for field in (key, f"{key}_final"):
        value = section[field]
        if (value is not None or field == key) and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        ):
            raise TrainConfigError(source, f"{name}.{field}", f"expected a number, got {value!r}", "write e.g. 1.0")
    final_iteration = section[f"{key}_final_iteration"]
    if (section[f"{key}_final"] is None) != (final_iteration is None):
        raise TrainConfigError(
            source,
            f"{name}.{key}_final",
            f"{key}_final and {key}_final_iteration go together",
            f"give both (an anneal) or neither (a fixed {key})",
        )
    if final_iteration is not None and (
        isinstance(final_iteration, bool) or not isinstance(final_iteration, int) or final_iteration < 0
    ):
        raise TrainConfigError(
            source,
            f"{name}.{key}_final_iteration",
            f"expected an iteration, got {final_iteration!r}",
            "write e.g. 1500",
        )


def _validate_prior(config: dict[str, Any], source: str | Path) -> None:
    """The prior's schedule, and its file against the task's signals (here in the learner, before
    the run's folder is written)."""
    from sim2real.train.prior import PriorError, prior_from_setting

    prior = config["prior"]
    _validate_weight_line(prior, "prior", "lambda", source)
    if prior["spec"] is None:
        return
    try:
        prior_from_setting(prior["spec"], task=f"{config['robot']}_{config['task']}")
    except PriorError as exc:
        raise TrainConfigError(
            source, "prior.spec", str(exc), "correct the prior (sim2real prior check FILE)"
        ) from None


def _validate_behaviour_cloning(config: dict[str, Any], source: str | Path) -> None:
    """The cloning's schedule and batch, and that its buffer and recorded policy exist (their
    bags are read when the run starts)."""
    from sim2real.train.robot_data import DEMONSTRATION_TOPICS

    cloning = config["behaviour_cloning"]
    _validate_weight_line(cloning, "behaviour_cloning", "beta", source)
    batch = cloning["batch_size"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TrainConfigError(
            source, "behaviour_cloning.batch_size", f"expected a whole number >= 1, got {batch!r}", "write e.g. 256"
        )
    if cloning["demonstrations"] not in DEMONSTRATION_TOPICS:
        raise TrainConfigError(
            source,
            "behaviour_cloning.demonstrations",
            f"{cloning['demonstrations']!r} is not a demonstration stream",
            f"use one of {sorted(DEMONSTRATION_TOPICS)}",
        )
    _check_paths(cloning, "behaviour_cloning", ("buffer",), source)


def _check_paths(section: dict[str, Any], name: str, robot_data: tuple[str, ...], source: str | Path) -> None:
    """The section's robot data (a path, or for a list field several) and recorded policy exist."""
    for key in (*robot_data, "recorded_policy"):
        what = "a policy file" if key == "recorded_policy" else "a bag, a failure bundle or a folder of them"
        value = section[key]
        values = value if isinstance(value, list) and key != "recorded_policy" else [value]
        if value is None:
            continue
        for one in values:
            if not isinstance(one, str) or not Path(one).expanduser().exists():
                raise TrainConfigError(source, f"{name}.{key}", f"{one!r} does not exist", f"give {what} (or null)")


def _validate_domain_adaptation(config: dict[str, Any], source: str | Path) -> None:
    """The reversal's weight and schedule, the classifier's batch and rate, the bags."""
    adaptation = config["domain_adaptation"]
    if isinstance(adaptation["bags"], str):
        adaptation["bags"] = [adaptation["bags"]]
    if adaptation["bags"] is not None and (not isinstance(adaptation["bags"], list) or not adaptation["bags"]):
        raise TrainConfigError(
            source,
            "domain_adaptation.bags",
            f"expected a list of bags or folders, got {adaptation['bags']!r}",
            "write e.g. [bags/go2]",
        )
    _check_paths(adaptation, "domain_adaptation", ("bags",), source)
    for key in ("lambda", "classifier_learning_rate"):
        value = adaptation[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise TrainConfigError(
                source, f"domain_adaptation.{key}", f"expected a number >= 0, got {value!r}", "write e.g. 0.1"
            )
    from sim2real.core.observation import VOCABULARY

    shared = adaptation["shared_terms"]
    if not isinstance(shared, list) or any(not isinstance(name, str) or name not in VOCABULARY for name in shared):
        raise TrainConfigError(
            source,
            "domain_adaptation.shared_terms",
            f"expected a list of observation terms, got {shared!r}",
            f"name terms of {sorted(VOCABULARY)} (or [])",
        )
    if adaptation["schedule"] not in ("dann", "fixed"):
        raise TrainConfigError(
            source, "domain_adaptation.schedule", f"{adaptation['schedule']!r} is not a schedule", "use dann or fixed"
        )
    batch = adaptation["batch_size"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TrainConfigError(
            source, "domain_adaptation.batch_size", f"expected a whole number >= 1, got {batch!r}", "write e.g. 256"
        )


def rsl_rl_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The dict rsl_rl 5.x builds PPO and its actor/critic from."""
    from sim2real.train.rsl_rl_env import obs_groups
    from sim2real.train.symmetry import symmetry_cfg

    policy, ppo = config["policy"], dict(config["ppo"])
    # rsl_rl keeps a linear schedule's rate fixed; the runner moves it each iteration.
    ppo.pop("learning_rate_final_iteration", None)
    if ppo.pop("learning_rate_final", None) is not None:
        ppo["schedule"] = "fixed"
    model = {
        "class_name": "rsl_rl.models:MLPModel",
        "activation": policy["activation"],
        "obs_normalization": bool(policy["obs_normalization"]),
    }
    return {
        "num_steps_per_env": config["num_steps_per_env"],
        "save_interval": config["save_interval"],
        "obs_groups": obs_groups(config.get("critic_observation", "policy")),
        "algorithm": {
            "class_name": "rsl_rl.algorithms:PPO",
            **ppo,
            "symmetry_cfg": symmetry_cfg(config.get("symmetry") or {}),
        },
        "actor": {
            **model,
            "hidden_dims": list(policy["actor_hidden_dims"]),
            "distribution_cfg": {
                "class_name": "rsl_rl.modules.distribution:GaussianDistribution",
                "init_std": float(policy["init_noise_std"]),
                "std_type": "scalar",
            },
        },
        "critic": {**model, "hidden_dims": list(policy["critic_hidden_dims"])},
        "check_for_nan": True,
    }
