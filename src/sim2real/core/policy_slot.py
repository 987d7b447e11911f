"""The running policy and its hot-swap: validate, dry-run, stage, cross-fade.

A :class:`PolicySlot` holds the policy that computes joint targets every tick. A new
model reaches it only through :meth:`PolicySlot.propose`, which runs on the caller's
thread (never the control thread) and either stages the model or refuses it with one
reason string; a refused model never touches the running one. Checks, in order:

1. **where**: the file lies under one of the configured policy directories, after
   resolving symlinks (a link inside the directory pointing elsewhere is refused);
2. **what**: :func:`load_policy` opens it (one self-contained ONNX file, sim2real metadata);
3. **for whom**: robot name, joint names and order, control period and PD gains equal
   the running robot profile's (every difference listed), and every observation term
   can be built on this robot;
4. **how it behaves**: a dry run over the last ticks' real inputs (a ring buffer of
   :class:`RobotSignals`): every action finite and within the action bound (its
   ``action_clip``, else the configured ``action_bound``), every joint target within
   ``max_overreach`` rad of the joint limits, and its joint targets for the newest input
   within ``max_jump`` rad of the targets being sent now.

With ``trusted_keys`` set, step 2 also checks the file's ed25519 signature (on the very bytes
that are loaded), and a file larger than ``max_bytes`` is refused before it is read. The
starting policy may lie outside the policy directories (the operator named it at launch); the
exact file is then allowed, never its folder.

While running, the **action guard** stops any tick whose joint targets pass a joint limit by more
than ``max_overreach``: its targets become NaN, on which the supervisor holds at once, and the
reason is kept (``guard_reason``). The shipped Go2 policy's targets stayed inside the limits at
every command of its trained ranges; a policy clipped at ``action_clip`` 100 could reach 25 rad.
Each policy sees the operator's commands clamped to its trained ranges (:mod:`trained_ranges`). A candidate that
   observes a gait clock runs the dry run on the running policy's gait phases (recorded
   with each input) and keeps that phase when it takes over: a trot swapped onto a trot
   goes on in step, instead of starting its clock at 0 against legs already mid-stride.

A staged model takes over at the next tick boundary. For ``crossfade`` seconds both
policies run, each on its own ``last_action``, and the sent targets move linearly from
the old policy's to the new one's, so a disagreement of ``d`` rad becomes ``d / n``
per tick over ``n`` ticks. The new policy starts with the ``last_action`` of its dry
run, i.e. as if it had been running all along, not with the all-zero action it only
ever saw at the start of a training episode.

Threads: :meth:`tick` belongs to the control thread; :meth:`propose` to one other
thread. They share only the staged model, the input history and the last targets,
each handed over under a lock that is never held during inference.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from sim2real.core.errors import InputError
from sim2real.core.gait import GaitClock, gait_settings
from sim2real.core.observation import RobotSignals
from sim2real.core.policy_file import PolicyFile, PolicyFileError, load_policy
from sim2real.core.robot_inputs import missing_inputs, unbuildable_terms
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.trained_ranges import TrainedRanges

HISTORY_TICKS = 50  # 1 s at 50 Hz: enough motion to exercise a policy, recent enough to be relevant
DEFAULT_MAX_JUMP = 0.5  # rad; the supervisor's target_step clamp (go2: 0.35 rad per command period) is the backstop
DEFAULT_CROSSFADE = 0.2  # s
DEFAULT_ACTION_BOUND = 100.0  # |a| for policies exported without an action clip (legged_gym's clip_actions)
DEFAULT_MAX_OVERREACH = 0.3  # rad a joint target may pass the joint's limit before the action guard stops the tick
EVENTS_KEPT = 20
GAIN_RTOL = 1e-6


class PolicyRefused(InputError):
    """A policy that was not started or staged; ``reason`` says why (a running policy runs on)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class DryRunResult:
    ticks: int  # recorded inputs the candidate ran on (0: nothing recorded yet)
    seconds: float
    max_abs_action: float = 0.0
    jump: float = 0.0  # max |targets_candidate - targets_current| on the newest input, rad
    note: str = ""

    def describe(self) -> str:
        if not self.ticks:
            return f"dry run skipped ({self.note})"
        return (
            f"dry run on {self.ticks} ticks in {self.seconds * 1e3:.1f} ms: max |action| "
            f"{self.max_abs_action:.3g}, target jump {self.jump:.3f} rad"
        )


@dataclass
class SwapEvent:
    """One swap request, from the request to the end of its cross-fade (or its refusal)."""

    path: str
    sha256_old: str
    sha256_new: str = ""
    signer: Optional[str] = None  # the trusted key that verified it (None: no trusted_keys)
    accepted: bool = False
    reason: str = ""
    validate_s: float = 0.0  # s to load and check (a refusal: until refused)
    dry_run: Optional[DryRunResult] = None
    requested_at: float = field(default_factory=time.monotonic)
    staged_to_swap_s: Optional[float] = None  # staging -> the first tick that used the new policy
    swap_gap: Optional[float] = None  # max |new - old| targets at the swap tick, rad
    largest_step: Optional[float] = None  # largest per-tick change of the sent targets while fading, rad
    fade_ticks: int = 0
    completed: bool = False

    def describe(self) -> str:
        if not self.accepted:
            return f"refused {self.path} after {self.validate_s * 1e3:.0f} ms: {self.reason}"
        signed = f", signed by {self.signer}" if self.signer else ""
        text = (
            f"{self.path} sha256 {self.sha256_old[:12]} -> {self.sha256_new[:12]}{signed}: validated in "
            f"{self.validate_s * 1e3:.1f} ms, {self.dry_run.describe() if self.dry_run else 'no dry run'}"
        )
        if self.swap_gap is not None:
            assert self.staged_to_swap_s is not None  # set as the fade began, before its first tick set swap_gap
            # None for a swap applied on the slot's very first tick (no targets before it to step from).
            step = "no step yet" if self.largest_step is None else f"largest step {self.largest_step:.3f} rad"
            text += (
                f"; swapped {self.staged_to_swap_s * 1e3:.1f} ms after staging, gap {self.swap_gap:.3f} rad "
                f"cross-faded over {self.fade_ticks} ticks, {step}"
            )
        return text


class RunningPolicy:
    """A loaded policy with its own previous action: what one policy needs to tick."""

    def __init__(self, policy: PolicyFile, last_action: Optional[np.ndarray] = None):
        self.policy = policy
        meta = policy.metadata
        self.spec = meta.observation_spec
        self.clip = meta.action_clip
        self.default = np.asarray(meta.default_joint_positions, dtype=float)
        self.last_action = np.zeros(meta.num_joints) if last_action is None else np.array(last_action, dtype=float)
        self.inference_s = 0.0
        # Its own clock from phase 0, as in training, if it was trained with one (a swapped-in
        # policy's clock is then set to the running gait's phase: PolicySlot.dry_run).
        observes_clock = "gait_clock" in self.spec.names
        try:
            gait = gait_settings(meta.task_config, required=observes_clock) if observes_clock else None
        except ValueError as exc:
            raise PolicyRefused(
                f"the policy observes gait_clock but its task config declares no gait.frequency "
                f"({exc}); re-export it from a checkpoint of a task with a gait section"
            ) from None
        self.clock = None if gait is None else GaitClock(gait["frequency"], meta.control_period)
        self.reads_state_estimate = "base_linear_velocity" in self.spec.signals_needed()
        self.ranges = TrainedRanges.of(meta.task_config)
        self.clamped = ""  # what the last step clamped of the operator's commands ("" nothing)

    @property
    def gait_phase(self) -> Optional[float]:
        """The phase (cycles) the next :meth:`step` observes; None without a gait clock."""
        return None if self.clock is None else self.clock.phase

    def set_gait_phase(self, phase: float) -> None:
        """Take up a running gait's phase (cycles); nothing without a gait clock."""
        if self.clock is not None:
            self.clock.phase = float(phase) % 1.0

    def step(self, signals: RobotSignals, gait_phase: Optional[float] = None) -> tuple[np.ndarray, np.ndarray]:
        """(raw actions, joint targets) for ``signals``; advances ``last_action`` and the gait
        clock. ``gait_phase``: set the clock to this phase first (ignored without a clock)."""
        if gait_phase is not None:
            self.set_gait_phase(gait_phase)
        signals, self.clamped = self.ranges.clamp(signals)
        own = replace(
            signals,
            last_action=self.last_action,
            default_joint_position=self.default,
            gait_phase=None if self.clock is None else self.clock.phase,
        )
        if self.clock is not None:
            self.clock.advance()
        observation = self.spec.observe(own)
        start = time.perf_counter()
        actions = np.asarray(self.policy.act(observation), dtype=float)
        self.inference_s = time.perf_counter() - start
        # The env fed back the clipped action; feeding the raw one would be a different input. A
        # non-finite action is not fed back: the supervisor holds on it, and the next tick's
        # observation must not carry it (it would make every later action NaN too).
        if np.all(np.isfinite(actions)):
            self.last_action = np.clip(actions, -self.clip, self.clip) if self.clip is not None else actions
        return actions, self.policy.metadata.joint_targets(actions)


def profile_differences(policy: PolicyFile, profile: RobotProfile) -> list[str]:
    """Every way the policy's metadata disagrees with the robot profile (empty: none)."""
    meta = policy.metadata
    problems = []
    if meta.robot != profile.name:
        problems.append(f"robot: trained for {meta.robot!r}, running {profile.name!r}")
    theirs, ours = list(meta.joint_names), profile.joint_names
    if theirs != ours:
        extra = [n for n in theirs if n not in ours]
        absent = [n for n in ours if n not in theirs]
        if extra:
            problems.append(f"joints: the policy has {extra}, which robot {profile.name!r} lacks")
        if absent:
            problems.append(f"joints: robot {profile.name!r} has {absent}, which the policy lacks")
        if not extra and not absent:
            first = next(i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b)
            problems.append(
                f"joint order: index {first} is {theirs[first]!r} in the policy, {ours[first]!r} on the "
                f"robot (robot order: {ours})"
            )
    if not math.isclose(meta.control_period, profile.policy_period, rel_tol=1e-6):
        problems.append(f"control period: policy {meta.control_period:g} s, robot {profile.policy_period:g} s")
    index = {name: i for i, name in enumerate(theirs)}
    for gain, mine in (("kp", profile.kp), ("kd", profile.kd)):
        values = getattr(meta, gain)
        wrong = [
            f"{name} {values[index[name]]:g} vs {mine[j]:g}"
            for j, name in enumerate(ours)
            if name in index and not math.isclose(values[index[name]], mine[j], rel_tol=GAIN_RTOL, abs_tol=1e-9)
        ]
        if wrong:
            problems.append(f"{gain} (policy vs robot): {', '.join(wrong)}")
    return problems


class PolicySlot:
    def __init__(
        self,
        profile: RobotProfile,
        policy_dirs: Sequence[str | Path],
        *,
        max_jump: float = DEFAULT_MAX_JUMP,
        crossfade: float = DEFAULT_CROSSFADE,
        action_bound: float = DEFAULT_ACTION_BOUND,
        history: int = HISTORY_TICKS,
        max_overreach: float = DEFAULT_MAX_OVERREACH,
        max_bytes: Optional[int] = None,
        trusted_keys=None,
    ):
        """``trusted_keys``: a :class:`sim2real.core.policy_signing.TrustedKeys` (None: unsigned
        files run); ``max_bytes``: the largest policy file accepted (None: any)."""
        for name, value in (("max_jump", max_jump), ("action_bound", action_bound), ("max_overreach", max_overreach)):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not (crossfade >= 0 and math.isfinite(crossfade)):
            raise ValueError(f"crossfade must be >= 0 s, got {crossfade!r}")
        self.profile = profile
        self.policy_dirs: list[Path] = []
        for directory in policy_dirs:
            self.allow_directory(directory)
        self.max_jump = float(max_jump)
        self.crossfade = float(crossfade)
        self.action_bound = float(action_bound)
        self.max_overreach = float(max_overreach)
        self._target_low = profile.lower_limits - self.max_overreach  # the action guard's bounds
        self._target_high = profile.upper_limits + self.max_overreach
        self.max_bytes = max_bytes
        self.trusted_keys = trusted_keys
        self._allowed_files: set[Path] = set()
        self.guard_trips = 0  # ticks the action guard stopped
        self.guard_reason = ""  # why it last did
        self.commands_clamped = 0  # ticks whose operator commands were clamped to the trained ranges
        self.last_clamp = ""
        self.fade_ticks = round(self.crossfade / profile.policy_period)
        self.active: Optional[RunningPolicy] = None
        self.events: collections.deque[SwapEvent] = collections.deque(maxlen=EVENTS_KEPT)
        self.refused = 0
        self.swaps = 0
        self.inference_s = 0.0  # onnxruntime time of the last tick, every policy it ran
        self._lock = threading.Lock()
        self._propose_lock = threading.Lock()  # one candidate at a time, whoever calls
        # Each tick's inputs with the gait phase the running policy observed on them (None: no clock).
        self._history: collections.deque[tuple[RobotSignals, Optional[float]]] = collections.deque(maxlen=history)
        self._targets: Optional[np.ndarray] = None  # what the last tick sent
        self._staged: Optional[tuple[RunningPolicy, SwapEvent, float]] = None
        self._fade: Optional[_Fade] = None

    def allow_directory(self, directory: str | Path) -> None:
        resolved = Path(directory).expanduser().resolve()
        if resolved not in self.policy_dirs:
            self.policy_dirs.append(resolved)

    # -- checks (any thread) -------------------------------------------------------------------
    def check_location(self, path: str | Path) -> Path:
        """The resolved file, or PolicyRefused if it lies outside every policy directory."""
        text = str(path).strip()
        if not text:
            raise PolicyRefused("empty policy path")
        resolved = Path(text).expanduser().resolve()
        if resolved not in self._allowed_files and not any(resolved.is_relative_to(d) for d in self.policy_dirs):
            shown = f"{text} (resolves to {resolved})" if str(resolved) != text else text
            raise PolicyRefused(
                f"{shown} is outside the policy directories {[str(d) for d in self.policy_dirs]}; "
                "copy the model into one of them (parameter policy_dirs)"
            )
        return resolved

    def validate(self, path: str | Path) -> PolicyFile:
        """Location, file, profile and observation checks; raises PolicyRefused with the reason."""
        resolved = self.check_location(path)
        try:
            policy = load_policy(resolved, max_bytes=self.max_bytes, trusted_keys=self.trusted_keys)
        except PolicyFileError as exc:
            raise PolicyRefused(str(exc)) from None
        policy.path = Path(path)
        problems = profile_differences(policy, self.profile) + unbuildable_terms(
            policy.metadata.observation_spec, self.profile
        )
        if problems:
            raise PolicyRefused(f"{path} does not match robot profile {self.profile.name!r}: " + "; ".join(problems))
        return policy

    def dry_run(self, candidate: PolicyFile) -> tuple[DryRunResult, RunningPolicy]:
        """Run ``candidate`` over the recorded inputs; PolicyRefused if any output is unsafe."""
        with self._lock:
            history = list(self._history)
            current = None if self._targets is None else self._targets.copy()
        start = time.perf_counter()
        trial = RunningPolicy(candidate)
        if not history:
            return DryRunResult(0, 0.0, note="no tick has run yet: nothing is being commanded"), trial
        missing = missing_inputs(candidate.metadata.observation_spec, history[-1][0])
        if missing:
            raise PolicyRefused("; ".join(missing))
        clip = candidate.metadata.action_clip
        bound = clip if clip is not None else self.action_bound
        bound_name = "its action_clip" if clip is not None else "the action bound (parameter action_bound)"
        largest = 0.0
        targets = None
        for tick, (signals, gait_phase) in enumerate(history):
            actions, targets = trial.step(signals, gait_phase)
            if not np.all(np.isfinite(actions)):
                bad = [self.profile.joint_names[i] for i in np.flatnonzero(~np.isfinite(actions))]
                raise PolicyRefused(f"dry run: non-finite actions for {bad} on recorded tick {tick + 1}/{len(history)}")
            peak = float(np.max(np.abs(actions)))
            if peak > bound:
                joint = self.profile.joint_names[int(np.argmax(np.abs(actions)))]
                raise PolicyRefused(
                    f"dry run: action {peak:.3g} on {joint} exceeds {bound_name} {bound:g} "
                    f"on recorded tick {tick + 1}/{len(history)}"
                )
            largest = max(largest, peak)
            past = self.overreach(targets)
            if past:
                raise PolicyRefused(f"dry run: {past} on recorded tick {tick + 1}/{len(history)}")
        jump = 0.0
        if current is not None:
            # A joint whose running target is not finite (a running policy that failed) has no
            # position to jump from: the supervisor held it, and limits the step on engage.
            difference = np.where(np.isfinite(current), np.abs(targets - current), 0.0)
            jump = float(np.max(difference))
            if jump > self.max_jump:
                joint = self.profile.joint_names[int(np.argmax(difference))]
                raise PolicyRefused(
                    f"dry run: joint targets would jump {jump:.3f} rad on {joint} (max_jump {self.max_jump:g} rad)"
                )
        return DryRunResult(len(history), time.perf_counter() - start, largest, jump), trial

    # -- swapping (any thread but the control thread) ---------------------------------------------
    def propose(self, path: str | Path, before_staging=None) -> SwapEvent:
        """Validate, dry-run and stage ``path``. Never raises: the event says accepted or why not.
        ``before_staging(event)``: called for an accepted candidate just before it is staged (the
        audit log's record); if it raises OSError the swap is refused with that reason."""
        with self._propose_lock:
            old = self.active.policy.sha256 if self.active else ""
            event = SwapEvent(path=str(path), sha256_old=old)
            start = time.perf_counter()
            try:
                busy = self._busy()
                if busy:
                    raise PolicyRefused(busy)
                candidate = self.validate(path)
                event.sha256_new = candidate.sha256
                event.signer = candidate.signer.signer if candidate.signer is not None else None
                event.validate_s = time.perf_counter() - start
                event.dry_run, trial = self.dry_run(candidate)
                if before_staging is not None:
                    try:
                        before_staging(event)
                    except OSError as exc:
                        raise PolicyRefused(
                            f"the swap could not be recorded ({exc}); refused, since every swap "
                            "must be in the audit log"
                        ) from None
                with self._lock:
                    busy = self._busy()
                    if busy:
                        raise PolicyRefused(busy)
                    self._staged = (trial, event, time.monotonic())
                event.accepted = True
            except PolicyRefused as exc:
                event.reason = exc.reason
                event.validate_s = time.perf_counter() - start  # for a refusal: the whole time it took
                self.refused += 1
            self.events.append(event)
            return event

    def _busy(self) -> str:
        if self._staged is not None:
            return f"a swap to {self._staged[1].path} is staged and not yet running; try again in a moment"
        if self._fade is not None:
            return f"the swap to {self._fade.event.path} is still cross-fading; try again in {self.crossfade:g} s"
        return ""

    def start(self, path: str | Path) -> PolicyFile:
        """The first policy (no dry run: nothing runs yet). Raises PolicyRefused with the reason.
        The operator named this file: it is allowed wherever it lies (the file, not its folder)."""
        text = str(path).strip()
        if text:
            self._allowed_files.add(Path(text).expanduser().resolve())
        policy = self.validate(path)
        self.active = RunningPolicy(policy)
        return policy

    # -- the control thread ----------------------------------------------------------------------
    def tick(self, signals: RobotSignals) -> np.ndarray:
        """Joint targets for this tick (profile order); applies a staged swap at its start."""
        with self._lock:
            staged, self._staged = self._staged, None
        if staged is not None:
            self._begin_fade(*staged)
        active = self.active
        assert active is not None, "tick() before start()"
        gait_phase = active.gait_phase
        # What each policy fed back before this tick: a tick the action guard withholds must not
        # become the next observation's last_action.
        fed_back = [(p, p.last_action.copy()) for p in self.running]
        _, targets = active.step(signals)
        self.inference_s = active.inference_s
        fade = self._fade
        if fade is not None:
            targets = self._fade_step(fade, signals, targets)
            self.inference_s += fade.incoming.inference_s
        clamped = next((p.clamped for p in (active, fade.incoming if fade else None) if p and p.clamped), "")
        if clamped:
            self.commands_clamped += 1
            self.last_clamp = clamped
        past = self.overreach(targets)
        if past:  # NaN: the supervisor holds on it at once
            self.guard_trips += 1
            self.guard_reason = f"action guard: {past}; the tick's targets were withheld (NaN)"
            targets = np.full_like(targets, np.nan)
            for policy, last_action in fed_back:
                policy.last_action = last_action
        with self._lock:
            self._history.append((signals, gait_phase))
            self._targets = targets
        return targets

    def _begin_fade(self, incoming: RunningPolicy, event: SwapEvent, staged_at: float) -> None:
        event.staged_to_swap_s = time.monotonic() - staged_at
        running_phase = self.active.gait_phase if self.active is not None else None
        if running_phase is not None:
            # Ticks may have passed since the dry run: take up the gait where it is now.
            incoming.set_gait_phase(running_phase)
        event.fade_ticks = max(1, self.fade_ticks)  # crossfade 0: the next tick is all new
        self.swaps += 1
        self._fade = _Fade(incoming, event, event.fade_ticks)

    def _fade_step(self, fade: "_Fade", signals: RobotSignals, old_targets: np.ndarray) -> np.ndarray:
        _, new_targets = fade.incoming.step(signals)
        fade.tick += 1
        if fade.tick == 1:
            fade.event.swap_gap = float(np.max(np.abs(new_targets - old_targets)))
        alpha = fade.tick / fade.ticks
        targets = (1.0 - alpha) * old_targets + alpha * new_targets
        if self._targets is not None:
            step = float(np.max(np.abs(targets - self._targets)))
            fade.event.largest_step = max(fade.event.largest_step or 0.0, step)
        if fade.tick >= fade.ticks:
            self.active = fade.incoming
            fade.event.completed = True
            self._fade = None
        return targets

    def overreach(self, targets: np.ndarray) -> str:
        """What in ``targets`` passes a joint limit by more than ``max_overreach`` ("": nothing).
        Non-finite targets are left to the supervisor's non-finite check."""
        past = np.where(
            np.isfinite(targets), np.maximum(self._target_low - targets, targets - self._target_high), -np.inf
        )
        worst = int(np.argmax(past))
        if past[worst] <= 0:
            return ""
        name = self.profile.joint_names[worst]
        return (
            f"joint target {targets[worst]:.2f} rad on {name} is {past[worst] + self.max_overreach:.2f} rad past "
            f"its limit (max_overreach {self.max_overreach:g} rad)"
        )

    @property
    def running(self) -> list[RunningPolicy]:
        """The policies the next tick runs (two while cross-fading)."""
        fade = self._fade
        assert self.active is not None, "no policy runs before start()"
        return [self.active] if fade is None else [self.active, fade.incoming]

    def targets(self) -> Optional[np.ndarray]:
        with self._lock:
            return None if self._targets is None else self._targets.copy()


@dataclass
class _Fade:
    incoming: RunningPolicy
    event: SwapEvent
    ticks: int
    tick: int = 0
