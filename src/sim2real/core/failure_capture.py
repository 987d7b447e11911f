"""Failure collection, ROS-free: per-topic ring buffers, failure triggers, bundle writing.

:class:`TopicRing` keeps the serialized messages of one topic for ``seconds`` and at most
``max_bytes``. :class:`FailureDetector` turns decoded samples of a few topics into
triggers (supervisor mode, tilt, policy output, latency, silence). :class:`FailureCollector`
owns both: on a trigger at time t it waits until t + post_event_s, copies the window
[t - pre_event_s, t + post_event_s] of every ring and hands it to a writer thread, which
writes the bundle atomically and rotates old ones. The node's callbacks only append bytes
and compare numbers; nothing on their path touches the disk.

Times are the collector's receive times in ns (the node's clock: wall time, or sim time
in lockstep); in real time the node measures silence on the steady clock
(:mod:`sim2real.core.steady_time`), so a stepped system clock fires no stale trigger.
Triggers within ``cooldown_s`` of an event that is still waiting for its
post-event window join it (a trip to DAMPING followed by an ESTOP is one failure with
two reasons).
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sim2real.core.failure_bundle import BUNDLE_TIME_FORMAT, clean_partials, rotate, write_bundle
from sim2real.core.failure_config import FailureConfig, TopicBuffer, TriggerConfig
from sim2real.core.rotations import tilt_angle
from sim2real.core.units import NS_PER_S

POLICY_STATUS_SUFFIX = ": policy"  # policy_runtime's /diagnostics status name ends so
SUPERVISOR_STATUS = "safety_supervisor: mode"
ENGAGED_MODES = ("ACTIVE", "TAKEOVER")


class TopicRing:
    """The newest messages of one topic, bounded in time and bytes."""

    __slots__ = ("spec", "_items", "_window_ns", "bytes", "received", "evicted", "last_ns")

    def __init__(self, spec: TopicBuffer):
        self.spec = spec
        self._items: deque[tuple[int, bytes]] = deque()
        self._window_ns = int(spec.seconds * NS_PER_S)
        self.bytes = 0
        self.received = 0
        self.evicted = 0
        self.last_ns: int | None = None

    def append(self, t_ns: int, data: bytes) -> None:
        items = self._items
        items.append((t_ns, data))
        self.bytes += len(data)
        self.received += 1
        self.last_ns = t_ns
        horizon = t_ns - self._window_ns
        limit = self.spec.max_bytes
        while items and (items[0][0] < horizon or self.bytes > limit):
            self.bytes -= len(items.popleft()[1])
            self.evicted += 1

    def window(self, start_ns: int, end_ns: int) -> list[tuple[int, bytes]]:
        return [item for item in list(self._items) if start_ns <= item[0] <= end_ns]

    def oldest_ns(self) -> int | None:
        return self._items[0][0] if self._items else None

    def __len__(self) -> int:
        return len(self._items)


def wall_to_clock(previous: tuple[int, int] | None, wall_now: int, clock_now: int) -> Callable[[int], int]:
    """Maps a message's wall-clock receive time onto the node's clock (sim time in lockstep,
    which runs at its own pace): linear between the previous reading ``(wall, clock)`` and
    this one; a time before the previous reading maps to its clock time."""
    if previous is None or wall_now <= previous[0] or clock_now < previous[1]:
        return lambda wall_ns: clock_now
    wall0, clock0 = previous
    rate = (clock_now - clock0) / (wall_now - wall0)
    return lambda wall_ns: (
        clock0 + min(int((wall_ns - wall0) * rate), clock_now - clock0) if wall_ns > wall0 else clock0
    )


@dataclass(frozen=True)
class Trigger:
    # supervisor_damping, fall, non_finite_command, saturation, latency_overrun, stale_sensor,
    # stale_command, manual
    kind: str
    reason: str  # one line for people


class FailureDetector:
    """Edge-triggered failure detection on decoded samples; also keeps the context a
    failure.json reports (the supervisor's checks, the latest diagnostics)."""

    def __init__(
        self,
        triggers: TriggerConfig,
        joint_names: Sequence[str] = (),
        lower: Sequence[float] | None = None,
        upper: Sequence[float] | None = None,
    ):
        self.config = triggers
        self.joint_names = list(joint_names)
        self.lower = None if lower is None else np.asarray(lower, float)
        self.upper = None if upper is None else np.asarray(upper, float)
        self.mode: str | None = None
        self.engaged = False  # the supervisor was seen in ACTIVE or TAKEOVER since start
        self.supervisor: dict[str, Any] = {}
        self.diagnostics: dict[str, dict[str, str]] = {}
        self.max_tilt_deg = 0.0
        self._fallen = False
        self._non_finite = False
        self._saturated = 0
        self._overrun = False
        self._stale: set[str] = set()
        # Every watched stream, and which of them carry commands: fixed by the config.
        self._watched = (*triggers.stale_topics, *triggers.stale_commands)
        self._commands = frozenset(triggers.stale_commands)
        self._index_names: tuple[str, ...] | None = None  # the command names self._index maps
        self._index = np.zeros(0, dtype=int)

    def safety_status(self, mode: str, values: Mapping[str, str]) -> Trigger | None:
        previous, self.mode = self.mode, mode
        previous_trips = self.supervisor.get("trips") if self.supervisor else None
        self.supervisor = {
            "trips": values.get("trips"),
            "mode": mode,
            "last_trip": values.get("last_trip", ""),
            "checks": {k[len("check/") :]: v for k, v in values.items() if k.startswith("check/")},
        }
        if mode in ENGAGED_MODES and not self.engaged:
            self.engaged = True
            # A condition held since start-up counts from the engage: were its latch kept, a
            # latency overrun or saturation that lasts would never be reported.
            self._fallen, self._overrun, self._saturated = False, False, 0
        if mode not in self.config.supervisor_modes or previous == mode:
            return None
        trip = values.get("last_trip") or "no reason given"
        if previous is None:
            # The first status seen: discovery takes seconds, and a fault in them (a trip at
            # start-up, a policy that failed at once) must not go unrecorded for want of an edge.
            # An operator's TAKEOVER is no trip: only one the supervisor's last trip names counts.
            if mode == "TAKEOVER" and f"-> {mode}" not in trip:
                return None
            return Trigger(
                f"supervisor_{mode.lower()}", f"supervisor already in {mode} when the collector started: {trip}"
            )
        if mode == "TAKEOVER" and values.get("trips") == previous_trips:
            return None  # an operator's takeover, not a hold trip (a dead policy, a lost deadman)
        if values.get("trips") is not None and values.get("trips") == previous_trips:
            # A stop no check made (~/damp, ~/estop, a button): last_trip is an older episode's.
            return Trigger(
                f"supervisor_{mode.lower()}",
                f"supervisor {previous} -> {mode}: an operator's request (no trip; the last trip was {trip})",
            )
        # The supervisor's last_trip already reads "ACTIVE -> DAMPING: <check>: <detail>".
        reason = f"supervisor {trip}" if f"-> {mode}" in trip else f"supervisor {previous} -> {mode}: {trip}"
        return Trigger(f"supervisor_{mode.lower()}", reason)

    def _armed(self, trigger: Trigger | None) -> Trigger | None:
        """A fall, saturation or latency trigger counts once the robot was engaged (unless
        ``before_engage``): before that, a robot carried to its place, a policy not in control
        and the start-up's slow first ticks are not failures. The edge state is reset at the
        engage, so a condition still present then fires once at its next sample."""
        return trigger if self.engaged or self.config.before_engage else None

    def imu(self, orientation_xyzw: Sequence[float]) -> Trigger | None:
        threshold = self.config.fall_tilt_deg
        if threshold is None:
            return None
        tilt = math.degrees(tilt_angle(orientation_xyzw))
        if math.isnan(tilt):
            # No orientation in it (NaN, all zeros): the supervisor damps on that (base_tilt), and
            # its DAMPING is a trigger of its own.
            return None
        self.max_tilt_deg = max(self.max_tilt_deg, tilt)
        if tilt > threshold and not self._fallen:
            self._fallen = True
            return self._armed(Trigger("fall", f"fall: base tilt {tilt:.0f} deg > {threshold:g} deg"))
        if tilt < 0.5 * threshold:
            self._fallen = False  # standing again: the next fall is a new one
        return None

    def policy_command(self, names: Sequence[str], positions: Sequence[float]) -> Trigger | None:
        if len(positions) != len(names):
            return None  # malformed: the supervisor ignores it too (it raised IndexError here, ending the node)
        q = np.asarray(positions, float)
        finite = bool(np.all(np.isfinite(q)))
        if self.config.non_finite_command:
            if not finite and not self._non_finite:
                self._non_finite = True
                bad = [n for n, v in zip(names, q) if not math.isfinite(v)]
                return Trigger(
                    "non_finite_command",
                    f"policy output not finite on {len(bad)} joints "
                    f"({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})",
                )
            self._non_finite = not finite
        if self.config.saturation_streak <= 0 or self.lower is None or not finite:
            self._saturated = 0
            return None
        if self._index_names != tuple(names):  # keyed on the names: another order of as many joints re-maps
            lookup = {n: i for i, n in enumerate(self.joint_names)}
            self._index_names = tuple(names)
            self._index = np.asarray([lookup.get(n, -1) for n in names], dtype=int)
        index = self._index
        assert self.upper is not None  # given with lower: the collector passes both of a profile's limits
        known = index >= 0
        margin = self.config.saturation_margin
        at_limit = (q[known] <= self.lower[index[known]] + margin) | (q[known] >= self.upper[index[known]] - margin)
        if at_limit.any():
            self._saturated += 1
            if self._saturated == self.config.saturation_streak:
                joints = [n for n, hit in zip(np.asarray(names)[known], at_limit) if hit]
                return self._armed(
                    Trigger(
                        "saturation",
                        f"policy output at joint limits for {self._saturated} "
                        f"consecutive commands ({', '.join(joints[:3])})",
                    )
                )
        else:
            self._saturated = 0
        return None

    def diagnostics_status(self, name: str, values: Mapping[str, str]) -> Trigger | None:
        self.diagnostics[name] = dict(values)
        threshold = self.config.latency_p99_ms
        if threshold is None or not name.endswith(POLICY_STATUS_SUFFIX):
            return None
        try:
            p99 = float(values.get("tick_latency_p99_ms", "nan"))
        except ValueError:
            return None
        if p99 > threshold and not self._overrun:
            self._overrun = True
            return self._armed(
                Trigger("latency_overrun", f"{name.split(':')[0]} tick latency p99 {p99:.1f} ms > {threshold:g} ms")
            )
        if p99 <= threshold:
            self._overrun = False
        return None

    def stale(self, now_ns: int, last_seen: Mapping[str, int | None]) -> Trigger | None:
        limit = self.config.stale_s
        if limit is None:
            return None
        newly: list[tuple[int, str]] = []
        for topic in self._watched:
            seen = last_seen.get(topic)
            if seen is None:
                continue  # never streamed (e.g. no IMU on an arm): nothing went stale
            if (now_ns - seen) / NS_PER_S <= limit:
                self._stale.discard(topic)
            elif topic not in self._stale:
                newly.append((seen, topic))
        if not newly:
            return None
        # The stream that stopped first goes first: the bundle is named after its first trigger,
        # the cause (a driver that stops before the supervisor's commands, or the other way round).
        # Not gated on engaging: a stream that flowed and stopped is a failure in any mode.
        seen, topic = min(newly)
        self._stale.add(topic)
        silent = (now_ns - seen) / NS_PER_S
        if topic in self._commands:
            publisher = (
                " (the safety supervisor, or the control chain it runs in)" if topic == "/joint_commands" else ""
            )
            return Trigger(
                "stale_command",
                f"{topic} silent for {silent:.2f} s > {limit:g} s: its publisher{publisher} died or hung "
                "and nothing commands the robot; only the driver's own command timeout, if it has one, "
                "stops it",
            )
        return Trigger("stale_sensor", f"{topic} silent for {silent:.2f} s > {limit:g} s")

    def context(self) -> dict[str, Any]:
        policy = {n: v for n, v in self.diagnostics.items() if n.endswith(POLICY_STATUS_SUFFIX)}
        latency = {
            n.split(":")[0]: {
                k: v
                for k, v in vals.items()
                if k.endswith("_ms") or "late" in k or "skipped" in k or "missed" in k or "period" in k
            }
            for n, vals in self.diagnostics.items()
        }
        return {
            "supervisor": dict(self.supervisor),
            "policy_runtime": policy,
            "latency": {n: v for n, v in latency.items() if v},
            "max_tilt_deg": round(self.max_tilt_deg, 2),
        }


@dataclass
class _Event:
    name: str
    time_ns: int
    wall: float
    triggers: list[Trigger]
    context: dict[str, Any]
    due_ns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class FailureCollector:
    """Buffers, triggers and the writer thread. Call :meth:`record` for every message,
    :meth:`trigger` when a detector fires or an operator asks, :meth:`poll` periodically
    (it starts due writes), :meth:`stop` at shutdown (it writes what is pending)."""

    def __init__(
        self,
        config: FailureConfig,
        output_dir: str | Path,
        static_info: Mapping[str, Any] | None = None,
        detector: FailureDetector | None = None,
        enrich: Callable[[dict[str, Any]], None] | None = None,
        on_written: Callable[[Path | None, str, str], None] | None = None,
    ):
        self.config = config
        self.output_dir = Path(output_dir).expanduser()
        self.static_info = dict(static_info or {})
        self.detector = detector or FailureDetector(config.triggers)
        self.rings = {t.topic: TopicRing(t) for t in config.topics}
        self.enrich = enrich  # writer thread: adds slow context (policy metadata) to failure.json
        self.on_written = on_written  # writer thread: (path or None, event name, message)
        self.pending: list[_Event] = []
        self.written: list[Path] = []
        self.errors: list[str] = []
        self._last_event: _Event | None = None
        self._queue: queue.Queue[_Event | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._writer, name="failure_writer", daemon=True)
        self.cleaned = clean_partials(self.output_dir)
        self._thread.start()

    # -- hot path (the node's callbacks) --------------------------------------------------
    def record(self, topic: str, t_ns: int, data: bytes) -> None:
        self.rings[topic].append(t_ns, data)

    def last_seen(self) -> dict[str, int | None]:
        return {topic: ring.last_ns for topic, ring in self.rings.items()}

    def trigger(self, trigger: Trigger, t_ns: int) -> str:
        """Declare a failure at ``t_ns``; returns the name of the bundle it goes into."""
        cooldown = int(self.config.cooldown_s * NS_PER_S)
        last = self._last_event
        if last is not None and t_ns - last.time_ns <= cooldown and last in self.pending:
            last.triggers.append(trigger)
            return last.name
        wall = time.time()
        stamp = datetime.fromtimestamp(wall, tz=timezone.utc).strftime(BUNDLE_TIME_FORMAT)[:-4] + "Z"  # ms
        event = _Event(
            name=f"{stamp}_{trigger.kind}",
            time_ns=t_ns,
            wall=wall,
            triggers=[trigger],
            context=self.detector.context(),
            due_ns=t_ns + int(self.config.post_event_s * NS_PER_S),
        )
        self.pending.append(event)
        self._last_event = event
        self._idle.clear()
        return event.name

    def poll(self, now_ns: int) -> None:
        """Send every event whose post-event window has passed to the writer."""
        for event in [e for e in self.pending if now_ns >= e.due_ns]:
            self._dispatch(event)

    def _dispatch(self, event: _Event) -> None:
        self.pending.remove(event)
        start = event.time_ns - int(self.config.pre_event_s * NS_PER_S)
        end = event.time_ns + int(self.config.post_event_s * NS_PER_S)
        # Copies of references only: the bytes are immutable and shared with the rings.
        event.extra["windows"] = {topic: ring.window(start, end) for topic, ring in self.rings.items()}
        event.extra["window_ns"] = (start, end)
        self._queue.put(event)

    # -- writer thread ------------------------------------------------------------------------
    def _writer(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                path = self._write(event)
                self.written.append(path)
                if self.on_written:
                    self.on_written(path, event.name, f"wrote {path}")
            except Exception as exc:  # a full disk must not kill the collector: report and go on
                message = f"could not write failure bundle {event.name}: {type(exc).__name__}: {exc}"
                self.errors.append(message)
                if self.on_written:
                    self.on_written(None, event.name, message)
            finally:
                if self._queue.empty() and not self.pending:
                    self._idle.set()

    def _write(self, event: _Event) -> Path:
        windows: dict[str, list[tuple[int, bytes]]] = event.extra["windows"]
        start, end = event.extra["window_ns"]
        topics = {t: self.rings[t].spec.msgtype for t, msgs in windows.items() if msgs}
        messages = sorted(((t, ts, data) for t, msgs in windows.items() for ts, data in msgs), key=lambda m: m[1])
        first = event.triggers[0]
        info: dict[str, Any] = {
            "format": "sim2real failure bundle 1",
            "reason": first.reason,
            "kind": first.kind,
            "triggers": [{"kind": t.kind, "reason": t.reason} for t in event.triggers],
            "time_ns": event.time_ns,
            "time_s": event.time_ns / NS_PER_S,
            "wall_time": datetime.fromtimestamp(event.wall, tz=timezone.utc).isoformat(),
            "window": {
                "start_ns": start,
                "end_ns": end,
                "pre_event_s": self.config.pre_event_s,
                "post_event_s": self.config.post_event_s,
            },
            "topics": {t: {"type": topics[t], "messages": len(windows[t])} for t in topics},
            "missing_topics": sorted(t for t, msgs in windows.items() if not msgs),
            **self.static_info,
            **event.context,
        }
        if self.enrich is not None:
            self.enrich(info)
        # Make room first: on a disk already below min_free the write itself would fail, and
        # rotating only after a successful write would then never free anything again.
        size = sum(len(data) for _, _, data in messages)
        rotate(self.output_dir, max(0, self.config.quota_bytes - size), self.config.min_free_bytes + size)
        try:
            path = write_bundle(self.output_dir, event.name, topics, messages, info)
        except BaseException:
            clean_partials(self.output_dir)  # the writer thread is the only writer: what is partial is ours
            raise
        rotate(self.output_dir, self.config.quota_bytes, self.config.min_free_bytes, keep=[path])
        return path

    # -- shutdown ------------------------------------------------------------------------------
    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is pending or being written (tests, benchmarks)."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Write the pending events with what has arrived so far, then end the writer."""
        for event in list(self.pending):
            self._dispatch(event)
        self._queue.put(None)
        self._thread.join(timeout)

    def stats(self) -> dict[str, Any]:
        return {
            "buffered_messages": sum(len(r) for r in self.rings.values()),
            "buffered_bytes": sum(r.bytes for r in self.rings.values()),
            "received": sum(r.received for r in self.rings.values()),
            "bundles_written": len(self.written),
            "write_errors": len(self.errors),
            "pending": len(self.pending),
            **{f"received{topic}": ring.received for topic, ring in self.rings.items()},
        }
