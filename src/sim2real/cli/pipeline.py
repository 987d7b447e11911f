"""`sim2real pipeline`: failures on the robot -> a harder randomization -> a retrained policy ->
validated in sim -> hot-swapped onto the robot.

Four stages, each runnable alone; they hand over through ``<out>/pipeline.json``:

adapt     the current policy's training randomization, with every range that does not
          cover a failure's recorded conditions widened to cover it (plus a margin), and the
          latency range's top raised to the policy tick latency the robot reported (part of
          its latency: it never lowers the bottom)
          -> ``<out>/randomization.yaml``
retrain   PPO warm-started from the current policy's checkpoint (its weights, normalizer
          and optimizer; ADR restarts from the adapted ranges) for ``--iterations`` more,
          exported -> ``<out>/candidate.onnx``. Without ``--checkpoint``, from the policy
          file itself: its actor, a new critic trained alone first, action noise ``--noise-std``
validate  replay every failure with the current policy and with the candidate, and evaluate
          both on nominal worlds and on the current policy's DR worlds. The candidate
          passes if it fails fewer replays (none, when the current policy fails none), and
          its success rate and mean return regress by at most ``--tolerance`` on each world
          set -> ``<out>/validation.json``
push      only a candidate that passed validation (same sha256): copied into the robot's
          policy directory and hot-swapped through ``policy_runtime``'s ``policy_path``
          (the runtime validates and dry-runs it again), confirmed from its /diagnostics

``--dry-run`` says what each stage would do and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim2real.core.errors import InputError
from sim2real.core.failure_bundle import Bundle, list_bundles
from sim2real.core.policy_file import load_policy
from sim2real.evaluate.failure_replay import identified_conditions
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.randomization import Randomization, load_randomization, physical_bounds

STAGES = ("adapt", "retrain", "validate", "push")
STATE_FILE = "pipeline.json"


class PipelineError(InputError):
    """A stage that cannot run as asked, with the reason and the fix."""


# ------------------------------------------------------------------ state
def _state(out: Path) -> dict[str, Any]:
    path = out / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(out: Path, **changes: Any) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    state = {**_state(out), **changes}
    (out / STATE_FILE).write_text(json.dumps(state, indent=2, default=str))
    return state


# Triggers that say a process of the graph died, nothing of the robot or the policy: a bundle
# with no other trigger is not a failure to train against.
PROCESS_DEATH_TRIGGERS = frozenset({"stale_command"})


def _robot_bundles(failures_dir: Path, robot: str) -> list[Bundle]:
    return [b for b in list_bundles(failures_dir) if b.info.get("robot") == robot and not _process_death_only(b)]


def _process_death_only(bundle: Bundle) -> bool:
    kinds = {t.get("kind") for t in bundle.info.get("triggers") or []}
    return bool(kinds) and kinds <= PROCESS_DEATH_TRIGGERS


# ------------------------------------------------------------------ adapt
@dataclass
class Change:
    name: str
    before: tuple[float, float] | None
    after: tuple[float, float]
    why: str


def _failure_conditions(bundles: list[Bundle]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(values of each condition the failures happened under, lower bounds of one)."""
    seen: dict[str, list[float]] = {}
    at_least: dict[str, list[float]] = {}
    for bundle in bundles:
        for name, value in (bundle.info.get("conditions") or identified_conditions(bundle.info) or {}).items():
            if value is not None and name in PhysicalConditions.names():
                seen.setdefault(name, []).append(float(value))
        for stats in (bundle.info.get("policy_runtime") or {}).values():
            # A robot whose policy ticks late acts on old data: actuation latency in sim terms.
            # The tick is only part of the robot's latency (the driver, the motors add theirs), so
            # it can raise the range's top, never lower its bottom.
            try:
                at_least.setdefault("latency", []).append(float(stats.get("tick_latency_p99_ms")) / 1e3)
            except (TypeError, ValueError):
                pass
    return seen, at_least


def adapt_randomization(
    base: Randomization, bundles: list[Bundle], margin: float = 0.1
) -> tuple[Randomization, list[Change]]:
    """Widen (or add) the ranges that do not cover the conditions the failures happened under."""
    ranges = base.ranges()
    seen, at_least = _failure_conditions(bundles)
    changes: list[Change] = []
    new_ranges: dict[str, tuple[float, float]] = {}
    added: dict[str, dict[str, Any]] = {}
    for name in sorted(set(seen) | set(at_least)):
        values, floors = seen.get(name, []), at_least.get(name, [])
        hi_seen = max(values + floors)
        if values:
            lo_seen = min(values)
        else:  # lower bounds only: nothing is known below the range (or the nominal value)
            nominal = getattr(PhysicalConditions(), name)
            lo_seen = ranges[name][0] if name in ranges else hi_seen if nominal is None else float(nominal)
        bounds = physical_bounds(name)
        if name in ranges:
            lo, hi = ranges[name]
            if lo <= lo_seen and hi_seen <= hi:
                continue  # covered already: the ranges do not explain these failures
            width = max(hi_seen, hi) - min(lo_seen, lo)
            low = max(bounds[0], min(lo, lo_seen - margin * width)) if values else lo
            new = (low, min(bounds[1], max(hi, hi_seen + margin * width)))
            new_ranges[name] = new
            why = (
                f"failures at {name} in [{lo_seen:g}, {hi_seen:g}] outside the trained [{lo:g}, {hi:g}]"
                if values
                else f"failures with {name} at least {hi_seen:g} (the policy's tick latency p99), above the "
                f"trained [{lo:g}, {hi:g}]"
            )
            changes.append(Change(name, (lo, hi), new, why))
        else:
            nominal = getattr(PhysicalConditions(), name)
            nominal = lo_seen if nominal is None else float(nominal)
            low, high = min(nominal, lo_seen), max(nominal, hi_seen)
            width = high - low
            new = (max(bounds[0], low - margin * width), min(bounds[1], high + margin * width))
            added[name] = {"uniform": [new[0], new[1]]}
            seen_as = (
                f"failures at {name} in [{lo_seen:g}, {hi_seen:g}]"
                if values
                else f"failures with {name} at least {hi_seen:g} (the policy's tick latency p99)"
            )
            changes.append(Change(name, None, new, f"{seen_as}; not randomized before (nominal {nominal:g})"))
    adapted = base.with_ranges(new_ranges) if new_ranges else base
    if added:
        data = adapted.to_dict()
        data["parameters"].update(added)
        adapted = Randomization.from_dict(data, source="adapted randomization")
    name = base.name if base.name.endswith("+failures") else f"{base.name}+failures"
    data = adapted.to_dict()
    data["name"] = name
    adapted = Randomization.from_dict(data, source="adapted randomization")
    final = adapted.ranges()
    for change in changes:
        # A distribution's own bounds (the config author's plausible limits) clip the widening.
        if tuple(final[change.name]) != tuple(change.after):
            bounds = adapted.parameters[change.name].bounds
            change.why += f"; clipped to the randomization's bounds [{bounds[0]:g}, {bounds[1]:g}]"
            change.after = tuple(final[change.name])
    return adapted, changes


def _current_randomization(policy_path: Path, given: str | None) -> Randomization:
    if given:
        return load_randomization(given)
    stored = load_policy(policy_path).metadata.randomization
    if stored is None:
        raise PipelineError(
            f"{policy_path} was trained without randomization, so there are no ranges to adapt. "
            "Fix: give the base with --randomization NAME|FILE"
        )
    return Randomization.from_dict(stored, source=f"{policy_path} (sim2real.randomization)")


def stage_adapt(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    policy = Path(args.policy)
    bundles = _robot_bundles(Path(args.failures), args.robot)
    base = _current_randomization(policy, args.randomization)
    adapted, changes = adapt_randomization(base, bundles, args.margin)
    print(f"[adapt] {len(bundles)} {args.robot} failure bundle(s) in {args.failures}; base randomization {base.name}")
    for c in changes:
        before = "not randomized" if c.before is None else f"[{c.before[0]:.4g}, {c.before[1]:.4g}]"
        print(f"  {c.name}: {before} -> [{c.after[0]:.4g}, {c.after[1]:.4g}]  ({c.why})")
    if not changes:
        print(
            "  no range changes: every recorded condition is covered already (or none was recorded); "
            "retraining then only adds experience from the same worlds"
        )
    path = out / "randomization.yaml"
    if args.dry_run:
        print(f"  dry run: would write {path}")
        return {}
    out.mkdir(parents=True, exist_ok=True)
    base_path = out / "base_randomization.yaml"
    base_path.write_text(yaml.safe_dump(base.to_dict(), sort_keys=False))
    path.write_text(yaml.safe_dump(adapted.to_dict(), sort_keys=False))
    print(f"  wrote {path}")
    return _save(
        out,
        failures=str(Path(args.failures).resolve()),
        randomization=str(path),
        base_randomization=str(base_path),
        bundles=[str(b.path) for b in bundles],
        changes=[vars(c) for c in changes],
    )


# ------------------------------------------------------------------ retrain
def stage_retrain(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from sim2real.train.checkpoint import load_checkpoint, save_checkpoint, warm_start
    from sim2real.train.train_config import override_config

    state = _state(out)
    randomization = args.adapted or state.get("randomization") or (out / "randomization.yaml")
    if args.checkpoint:
        if args.dry_run and not Path(args.checkpoint).is_file():
            print(f"[retrain] dry run: --checkpoint {args.checkpoint} does not exist; the real run would stop here")
            return {}
        checkpoint = load_checkpoint(args.checkpoint)
        source, start, trained = args.checkpoint, int(checkpoint["iteration"]), checkpoint["training_config"]
        extra: dict[str, Any] = {}
        how = "its networks, normalizer and optimizer"

        def warm_for(config: dict[str, Any]) -> dict[str, Any]:
            return warm_start(checkpoint, config, args.checkpoint)
    else:
        # No checkpoint: the policy file itself. Its actor carries over exactly; the critic is
        # new (trained alone first) and the action noise restarts at --noise-std.
        from sim2real.train.policy_warm_start import policy_iteration, warm_start_from_policy

        meta = load_policy(args.policy).metadata
        if not meta.training_config:
            raise PipelineError(
                f"{args.policy} carries no training config in its metadata, so there is no recipe "
                "to go on with. Fix: give --checkpoint runs/<run>/model_<N>.pt"
            )
        source, start, trained = args.policy, policy_iteration(meta), meta.training_config
        warmup = args.critic_warmup if args.critic_warmup is not None else min(50, args.iterations // 4)
        extra = {"policy.init_noise_std": args.noise_std, "critic_warmup.iterations": warmup}
        how = (
            f"its actor; a new critic trained alone for {warmup} iterations, action noise {args.noise_std:g} "
            "(give --checkpoint to keep the run's critic and optimizer)"
        )

        def warm_for(config: dict[str, Any]) -> dict[str, Any]:
            return warm_start_from_policy(args.policy, config)

    overrides = {"iterations": start + args.iterations, "num_envs": args.num_envs, "workers": args.workers, **extra}
    overrides.update(fine_tune_rate(trained.get("ppo", {}), start + args.iterations))
    print(
        f"[retrain] warm start from {source} (iteration {start}: {how}) for {args.iterations} iterations "
        f"under {randomization}"
    )
    if args.dry_run:
        print(f"  dry run: would train into {out / 'train'} and export {out / 'candidate.onnx'}")
        return {}
    if not Path(randomization).is_file():
        raise PipelineError(
            f"no adapted randomization at {randomization}. Fix: run `sim2real pipeline adapt` first "
            "or give --adapted FILE"
        )
    from sim2real.train.threads import single_threaded_learner

    single_threaded_learner()
    from sim2real.train.export import export_policy
    from sim2real.train.runner import Trainer

    load_randomization(randomization)  # a broken file fails here, before any training starts
    # The same recipe under the adapted ranges: warm_start drops the trained ranges and the ADR
    # state, which would put the old ranges back.
    config = override_config(trained, {**overrides, "randomization": str(randomization)}, source="sim2real pipeline")
    warm = save_checkpoint(out / "warm_start.pt", warm_for(config))
    train_dir = out / "train"
    trainer = Trainer(config, train_dir, resume=warm, progress=not args.no_progress)
    result = trainer.run()
    if result.interrupted:
        raise PipelineError("training was interrupted; run `sim2real pipeline retrain` again to redo it")
    from sim2real.train.checkpoint import latest_checkpoint

    report = export_policy(latest_checkpoint(train_dir), out / "candidate.onnx")
    print(f"  candidate {report.path} sha256 {report.policy.sha256[:16]} (iteration {report.iteration})")
    return _save(out, candidate=str(report.path), candidate_sha256=report.policy.sha256)


# ------------------------------------------------------------------ validate
def _replays(bundles: list[Bundle], policy: Path, runs: int) -> dict[str, Any]:
    from sim2real.evaluate.failure_replay import replay_failure

    results = [replay_failure(b, policy, seed=s) for b in bundles for s in range(runs)]
    return {
        "replays": len(results),
        "failed": sum(r.failed for r in results),
        "mean_survived_s": (sum(r.survived_s for r in results) / len(results)) if results else math.nan,
        "reasons": [r.reason for r in results if r.failed],
    }


def validate_candidate(
    current: Path,
    candidate: Path,
    bundles: list[Bundle],
    worlds: list[str],
    episodes: int,
    runs: int = 1,
    tolerance: float = 0.05,
    workers: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    from sim2real.evaluate.evaluate import evaluate_policy

    replay = {"current": _replays(bundles, current, runs), "candidate": _replays(bundles, candidate, runs)}
    reports = {
        who: evaluate_policy(path, worlds, episodes, seed=seed, workers=workers, progress=False)
        for who, path in (("current", current), ("candidate", candidate))
    }
    reasons = []
    cur, cand = replay["current"]["failed"], replay["candidate"]["failed"]
    if cur > 0 and cand >= cur:
        reasons.append(
            f"replayed failures: the candidate fails {cand} of {replay['candidate']['replays']}, "
            f"not fewer than the current policy's {cur}"
        )
    if cur == 0 and cand > 0:
        reasons.append(f"replayed failures: the candidate fails {cand} that the current policy survives")
    worlds_table = []
    for a, b in zip(reports["current"].worlds, reports["candidate"].worlds):
        row = {
            "world": a.name,
            "current_sr": a.success_rate,
            "candidate_sr": b.success_rate,
            "current_return": a.mean_return,
            "candidate_return": b.mean_return,
        }
        worlds_table.append(row)
        if b.success_rate < a.success_rate - tolerance:
            reasons.append(f"{a.name}: success rate {b.success_rate:.2f} < current {a.success_rate:.2f} - {tolerance}")
        if b.mean_return < a.mean_return - tolerance * abs(a.mean_return):
            reasons.append(f"{a.name}: mean return {b.mean_return:.3f} < current {a.mean_return:.3f} - {tolerance:.0%}")
    return {
        "passed": not reasons,
        "reasons": reasons,
        "replay": replay,
        "worlds": worlds_table,
        "current": str(current),
        "candidate": str(candidate),
        "candidate_sha256": load_policy(candidate).sha256,
        "tolerance": tolerance,
        "episodes": episodes,
    }


def print_validation(result: dict[str, Any]) -> None:
    r = result["replay"]
    print(
        f"  replayed failures ({r['current']['replays']} runs): current fails {r['current']['failed']}, "
        f"candidate fails {r['candidate']['failed']}; mean time to failure/end "
        f"{r['current']['mean_survived_s']:.2f} s vs {r['candidate']['mean_survived_s']:.2f} s"
    )
    print(f"  {'world':24} {'SR cur':>7} {'SR cand':>8} {'R cur':>9} {'R cand':>9}")
    for w in result["worlds"]:
        print(
            f"  {w['world']:24} {w['current_sr']:7.2f} {w['candidate_sr']:8.2f} {w['current_return']:9.3f} "
            f"{w['candidate_return']:9.3f}"
        )
    verdict = "PASSED" if result["passed"] else "REFUSED"
    print(f"  validation {verdict}" + ("" if result["passed"] else ": " + "; ".join(result["reasons"])))


def stage_validate(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    state = _state(out)
    candidate = Path(args.candidate or state.get("candidate") or out / "candidate.onnx")
    current = Path(args.policy)
    bundles = _robot_bundles(Path(args.failures), args.robot)
    base = state.get("base_randomization") or args.randomization
    if not base:
        try:  # the worlds the current policy was trained on, the same for both policies
            stored = _current_randomization(current, None)
            base = out / "base_randomization.yaml"
            if args.dry_run:
                base = f"{base} (the DR stored in {current.name}: {stored.name})"
            else:
                out.mkdir(parents=True, exist_ok=True)
                base.write_text(yaml.safe_dump(stored.to_dict(), sort_keys=False))
        except PipelineError:
            base = None
    worlds = ["nominal", str(base)] if base else ["nominal"]
    print(
        f"[validate] {candidate} against {current}: {len(bundles)} failure(s) x {args.runs} replay(s), "
        f"{args.episodes} episodes on {worlds}"
    )
    if args.dry_run:
        return {}
    if not candidate.is_file():
        raise PipelineError(f"no candidate at {candidate}. Fix: run `sim2real pipeline retrain` or give --candidate")
    result = validate_candidate(
        current, candidate, bundles, worlds, args.episodes, args.runs, args.tolerance, args.eval_workers
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(result, indent=2))
    print_validation(result)
    return _save(
        out,
        validation=str(out / "validation.json"),
        validated_sha256=result["candidate_sha256"],
        validation_passed=result["passed"],
    )


# ------------------------------------------------------------------ push
def stage_push(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    state = _state(out)
    candidate = Path(args.candidate or state.get("candidate") or out / "candidate.onnx")
    validation = out / "validation.json"
    if args.dry_run:
        print(f"[push] dry run: would push {candidate} only if {validation} says it passed, by hot-swap on {args.node}")
        return {}
    if not validation.is_file():
        raise PipelineError(
            f"no validation of {candidate} in {out}. Fix: run `sim2real pipeline validate` first; "
            "an unvalidated policy is never pushed"
        )
    result = json.loads(validation.read_text())
    sha = load_policy(candidate).sha256 if candidate.is_file() else None
    if result.get("candidate_sha256") != sha:
        raise PipelineError(
            f"{validation} validated sha256 {str(result.get('candidate_sha256'))[:12]}, but "
            f"{candidate} is {str(sha)[:12]}. Fix: validate this candidate"
        )
    if not result["passed"]:
        print(f"[push] refused: {candidate} failed validation: {'; '.join(result['reasons'])}")
        return _save(out, pushed=False)
    policy_dir = Path(args.policy_dir) if args.policy_dir else Path(args.policy).resolve().parent
    target = policy_dir / f"{args.robot}_{candidate.stem}_{sha[:12]}.onnx"
    print(f"[push] {candidate} -> {target}, then hot-swap on {args.node}")
    if args.dry_run:
        return {}
    from sim2real.nodes.policy_swap import swap_policy

    policy_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(candidate, target)
    accepted, reason = swap_policy(target, args.node, timeout=args.timeout)
    # Accepted is not running: the runtime's /diagnostics must report the swap to this sha256.
    confirmed = accepted and "swapped" in reason and f"-> {sha[:12]}" in reason
    if confirmed:
        print(f"  running on the robot, confirmed by its /diagnostics: {reason}")
    elif accepted:
        print(
            f"  accepted by the runtime but not confirmed running ({reason}). Check: the runtime ticks only "
            f"with all its inputs (`ros2 topic echo /diagnostics` says what it waits for)"
        )
    else:
        print(f"  refused by the runtime: {reason}")
    return _save(out, pushed=confirmed, accepted=accepted, pushed_path=str(target), push_reason=reason)


RUNNERS = {"adapt": stage_adapt, "retrain": stage_retrain, "validate": stage_validate, "push": stage_push}


def cmd_pipeline(args: argparse.Namespace) -> int:
    out = Path(args.out)
    stages = STAGES if args.stage == "run" else (args.stage,)
    if not Path(args.policy).is_file():
        raise PipelineError(f"no current policy at {args.policy}. Fix: --policy FILE (the policy the robot runs)")
    for stage in stages:
        RUNNERS[stage](args, out)
        state = _state(out)
        if stage == "validate" and not args.dry_run and not state.get("validation_passed"):
            print("[push] refused: the candidate did not pass validation; the robot keeps its policy")
            return 1
    if "push" in stages and not args.dry_run and not _state(out).get("pushed"):
        return 1
    return 0


def add_parser(sub, fmt: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter) -> None:
    p = sub.add_parser(
        "pipeline",
        formatter_class=fmt,
        help="failures -> adapted randomization -> retrained policy -> validated -> hot-swapped",
        description=__doc__.split("\n", 2)[2],
        epilog="examples:\n  sim2real pipeline run --robot panda --policy policies/panda_reach.onnx "
        "--checkpoint runs/reach/model_600.pt --dry-run\n"
        "  sim2real pipeline adapt --robot panda --policy policies/panda_reach.onnx --out runs/pipe\n"
        "  sim2real pipeline retrain --checkpoint runs/reach/model_600.pt --iterations 200 --out runs/pipe "
        "--policy policies/panda_reach.onnx\n"
        "  sim2real pipeline validate --out runs/pipe --policy policies/panda_reach.onnx --episodes 50\n"
        "  sim2real pipeline push --out runs/pipe --policy policies/panda_reach.onnx --node /policy_runtime\n",
    )
    p.add_argument("stage", choices=("run", *STAGES), help="run = every stage in order; or one stage alone")
    p.add_argument("--robot", default="go2", help="robot whose failures to use (failure.json 'robot')")
    p.add_argument("--policy", required=True, help="the policy the robot runs now (ONNX)")
    p.add_argument(
        "--failures",
        default=None,
        help="failure bundle folder (default: adapt and run: the collector's output_dir; later stages: the "
        "folder the adapt stage read into --out)",
    )
    p.add_argument(
        "--out",
        default="runs/pipeline",
        help="working folder: randomization, training, candidate, validation, pipeline.json",
    )
    p.add_argument("--randomization", help="base ranges (default: those stored in --policy)")
    p.add_argument("--margin", type=float, default=0.1, help="adapt: extra width beyond the failures, as a fraction")
    p.add_argument("--adapted", help="retrain: randomization YAML (default: the adapt stage's)")
    p.add_argument(
        "--checkpoint",
        help="retrain: checkpoint --policy was exported from (warm start; default: --policy itself, its actor only)",
    )
    p.add_argument(
        "--noise-std",
        type=float,
        default=0.3,
        help="retrain from the policy file: action noise to start PPO with (a file does not carry it)",
    )
    p.add_argument(
        "--critic-warmup",
        type=int,
        help="retrain from the policy file: iterations that train the new critic alone "
        "(default: a quarter of --iterations, at most 50)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=200,
        help="retrain: PPO iterations to add (2 runs every stage quickly, for a try)",
    )
    p.add_argument("--num-envs", type=int, help="retrain: parallel envs (default: the checkpoint's)")
    p.add_argument("--workers", type=int, help="retrain: env worker processes (default: the checkpoint's)")
    p.add_argument("--no-progress", action="store_true", help="retrain: no progress bar")
    p.add_argument("--candidate", help="validate/push: candidate ONNX (default: the retrain stage's)")
    p.add_argument("--episodes", type=int, default=50, help="validate: episodes per world set and policy")
    p.add_argument("--runs", type=int, default=1, help="validate: replays per failure bundle and policy")
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="validate: allowed drop in success rate (absolute) and mean return (relative)",
    )
    p.add_argument("--eval-workers", type=int, default=2, help="validate: evaluation processes (0: this one)")
    p.add_argument("--node", default="/policy_runtime", help="push: the robot's policy_runtime node")
    p.add_argument(
        "--policy-dir",
        help="push: one of the runtime's policy_dirs, where the candidate is copied "
        "(default: --policy's folder, which must be one of them)",
    )
    p.add_argument("--timeout", type=float, default=20.0, help="push: seconds to wait for the runtime's answer")
    p.add_argument("--dry-run", action="store_true", help="say what each stage would do; write and push nothing")

    def run(args):
        if args.failures is None:
            from sim2real.cli.failures import default_dir

            # A later stage replays the failures its adapt stage read, not another folder's;
            # adapt (and run, which starts with it) reads the collector's folder.
            recorded = _state(Path(args.out)).get("failures") if args.stage not in ("adapt", "run") else None
            args.failures = recorded or str(default_dir())
        return cmd_pipeline(args)

    p.set_defaults(func=run)


def fine_tune_rate(ppo: dict[str, Any], end: int) -> dict[str, Any]:
    """Overrides for a fine-tune (ending at iteration ``end``) of a recipe with ``ppo``: a
    linear recipe goes on at the rate its line ends at, not back at its start (which is what
    made the Panda's success swing before its schedule decayed). A flat line, so a final
    iteration of the recipe's own (an iteration of the old run) moves to the fine-tune's end."""
    if ppo.get("schedule") != "linear" or not ppo.get("learning_rate_final"):
        return {}
    overrides = {"ppo.learning_rate": ppo["learning_rate_final"]}
    if ppo.get("learning_rate_final_iteration"):
        overrides["ppo.learning_rate_final_iteration"] = end
    return overrides
