"""The failure collector's configuration (``config/failures/*.yaml``), validated up front.

What is buffered (topic, message type, how many seconds and megabytes), when a failure
is declared (the triggers and their thresholds) and where bundles go, with their quota.
Every problem is a :class:`FailureConfigError` naming the file, the field and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim2real.core.config_files import ConfigError, read_config

MB = 1024 * 1024
_TOP_KEYS = ("output_dir", "pre_event_s", "post_event_s", "cooldown_s", "quota_mb", "min_free_mb", "topics", "triggers")
_TRIGGER_KEYS = (
    "supervisor_modes",
    "fall_tilt_deg",
    "non_finite_command",
    "saturation_margin",
    "saturation_streak",
    "latency_p99_ms",
    "stale_s",
    "stale_topics",
    "stale_commands",
    "before_engage",
)
SUPERVISOR_MODES = ("STANDBY", "ACTIVE", "TAKEOVER", "DAMPING", "ESTOP")


class FailureConfigError(ConfigError):
    """A failure collector config that cannot be used."""


@dataclass(frozen=True)
class TopicBuffer:
    topic: str
    msgtype: str  # ROS 2 interface name, e.g. sensor_msgs/msg/JointState
    seconds: float
    max_bytes: int


@dataclass(frozen=True)
class TriggerConfig:
    supervisor_modes: tuple[str, ...] = ("TAKEOVER", "DAMPING", "ESTOP")  # TAKEOVER: hold trips only
    fall_tilt_deg: float | None = 60.0  # None: no fall trigger
    non_finite_command: bool = True
    saturation_margin: float = 0.01
    saturation_streak: int = 25  # 0: no saturation trigger
    latency_p99_ms: float | None = 15.0  # None: no latency trigger
    stale_s: float | None = 0.5  # None: no stale-sensor or stale-command trigger
    stale_topics: tuple[str, ...] = ("/joint_states", "/imu/data")
    # Command streams that must not stop once they flowed: the supervisor commands every period
    # in every mode, so its silence means its process died or hung.
    stale_commands: tuple[str, ...] = ("/joint_commands",)
    # False: falls, saturation and latency count only once the robot has been engaged (ACTIVE
    # or TAKEOVER); start-up (discovery, the first slow ticks) otherwise writes bundles of noise.
    before_engage: bool = False


@dataclass(frozen=True)
class FailureConfig:
    source: str
    output_dir: str
    pre_event_s: float
    post_event_s: float
    cooldown_s: float
    quota_bytes: int
    min_free_bytes: int
    topics: tuple[TopicBuffer, ...]
    triggers: TriggerConfig

    def topic(self, name: str) -> TopicBuffer | None:
        return next((t for t in self.topics if t.topic == name), None)


def load_failure_config(name_or_path: str | Path = "default") -> FailureConfig:
    path, data = read_config("failures", name_or_path, FailureConfigError, "failure collector config")
    return parse_failure_config(data, path)


def parse_failure_config(data: dict[str, Any], source: str | Path = "<failure config>") -> FailureConfig:
    def fail(field: str, problem: str, fix: str) -> FailureConfigError:
        return FailureConfigError(source, field, problem, fix)

    def number(
        mapping: dict, key: str, field: str, default: Any = None, positive: bool = False, optional: bool = False
    ) -> float:
        value = mapping.get(key, default)
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan
        if not math.isfinite(x) or x < 0 or (positive and x == 0):
            raise fail(
                field,
                f"{value!r} is not a {'positive' if positive else 'non-negative'} number",
                "write a finite number in SI units" + (" (or null to switch it off)" if optional else ""),
            )
        return x

    def optional_number(mapping: dict, key: str, field: str, default: Any, positive: bool = False) -> float | None:
        """A number, or None for a null: a trigger switched off."""
        if mapping.get(key, default) is None:
            return None
        return number(mapping, key, field, default, positive, optional=True)

    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise fail(unknown[0], "unknown setting", f"use only {list(_TOP_KEYS)}")
    pre = number(data, "pre_event_s", "pre_event_s", 5.0)
    post = number(data, "post_event_s", "post_event_s", 2.0)
    topics_data = data.get("topics")
    if not isinstance(topics_data, dict) or not topics_data:
        raise fail(
            "topics", "no topics to buffer", "list topics as '/name: {type: pkg/msg/Type, seconds: S, max_mb: M}'"
        )
    topics = [_topic_buffer(str(name), entry, pre + post, fail, number) for name, entry in topics_data.items()]
    triggers = _triggers(data.get("triggers") or {}, topics_data, fail, number, optional_number)
    return FailureConfig(
        source=str(source),
        output_dir=str(data.get("output_dir") or "~/.sim2real/failures"),
        pre_event_s=pre,
        post_event_s=post,
        cooldown_s=number(data, "cooldown_s", "cooldown_s", 5.0),
        quota_bytes=int(number(data, "quota_mb", "quota_mb", 500, positive=True) * MB),
        min_free_bytes=int(number(data, "min_free_mb", "min_free_mb", 200) * MB),
        topics=tuple(topics),
        triggers=triggers,
    )


def _topic_buffer(name: str, entry: Any, window: float, fail, number) -> TopicBuffer:
    """One entry of ``topics:``: a standard message type the bag writer knows, and a buffer long
    enough for the event ``window`` (pre_event_s + post_event_s)."""
    field = f"topics.{name}"
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or entry["type"].count("/") != 2:
        raise fail(
            field,
            f"{entry!r} has no message type like sensor_msgs/msg/JointState",
            "write {type: pkg/msg/Type, seconds: S, max_mb: M}",
        )
    extra = sorted(set(entry) - {"type", "seconds", "max_mb"})
    if extra:
        raise fail(f"{field}.{extra[0]}", "unknown setting", "a topic takes type, seconds and max_mb")
    try:  # a type rosbags cannot write would lose every bundle holding the topic, at failure time
        from sim2real.core.bags import TYPESTORE

        TYPESTORE.types[entry["type"]]
    except KeyError:
        raise fail(
            f"{field}.type",
            f"{entry['type']} is not a message type the bag writer knows (the standard ROS 2 Humble set)",
            "buffer a standard message type, or leave the topic out",
        ) from None
    seconds = number(entry, "seconds", f"{field}.seconds", window, positive=True)
    if seconds < window:
        raise fail(
            f"{field}.seconds",
            f"{seconds:g} s cannot hold the event window pre_event_s + post_event_s = {window:g} s",
            f"buffer at least {window:g} s or shorten the window",
        )
    max_mb = number(entry, "max_mb", f"{field}.max_mb", 8, positive=True)
    return TopicBuffer(name, entry["type"], seconds, int(max_mb * MB))


def _triggers(trig: Any, topics_data: dict, fail, number, optional_number) -> TriggerConfig:
    """``triggers:``: what starts a bundle; a stale topic must be one that is buffered."""
    if not isinstance(trig, dict):
        raise fail("triggers", f"expected a mapping, got {trig!r}", "write the triggers as a YAML mapping")
    unknown = sorted(set(trig) - set(_TRIGGER_KEYS))
    if unknown:
        raise fail(f"triggers.{unknown[0]}", "unknown trigger setting", f"use only {list(_TRIGGER_KEYS)}")
    modes = tuple(str(m).upper() for m in trig.get("supervisor_modes", ("TAKEOVER", "DAMPING", "ESTOP")) or ())
    bad = [m for m in modes if m not in SUPERVISOR_MODES]
    if bad:
        raise fail("triggers.supervisor_modes", f"unknown modes {bad}", f"use modes of {list(SUPERVISOR_MODES)}")
    stale_topics = tuple(trig.get("stale_topics", TriggerConfig.stale_topics) or ())
    # Unset: the supervisor's commands when they are buffered (a config that buffers no commands
    # watches none); a topic named here must be buffered.
    default_commands = tuple(t for t in TriggerConfig.stale_commands if t in topics_data)
    stale_commands = tuple(trig.get("stale_commands", default_commands) or ())
    for key, watched in (("stale_topics", stale_topics), ("stale_commands", stale_commands)):
        missing = [t for t in watched if t not in topics_data]
        if missing:
            raise fail(
                f"triggers.{key}",
                f"{missing} are not buffered, so their silence cannot be seen",
                "add them under topics: or remove them here",
            )
    non_finite = trig.get("non_finite_command", True)
    if not isinstance(non_finite, bool):  # bool("false") is True
        raise fail("triggers.non_finite_command", f"expected true or false, got {non_finite!r}", "write true or false")
    before_engage = trig.get("before_engage", False)
    if not isinstance(before_engage, bool):
        raise fail("triggers.before_engage", f"expected true or false, got {before_engage!r}", "write true or false")
    streak = trig.get("saturation_streak", 25)
    if isinstance(streak, bool) or not isinstance(streak, int) or streak < 0:  # int(0.7) = 0 switched it off
        raise fail(
            "triggers.saturation_streak",
            f"expected a whole number of commands >= 0, got {streak!r}",
            "write e.g. 25 (0: no saturation trigger)",
        )
    fall = optional_number(trig, "fall_tilt_deg", "triggers.fall_tilt_deg", 60.0, positive=True)
    if fall is not None and fall >= 180:
        raise fail(
            "triggers.fall_tilt_deg",
            f"{fall:g} deg can never be reached (a tilt is at most 180 deg)",
            "write e.g. 60 (or null to switch it off)",
        )
    return TriggerConfig(
        supervisor_modes=modes,
        fall_tilt_deg=fall,
        non_finite_command=non_finite,
        saturation_margin=number(trig, "saturation_margin", "triggers.saturation_margin", 0.01),
        saturation_streak=streak,
        latency_p99_ms=optional_number(trig, "latency_p99_ms", "triggers.latency_p99_ms", 15.0, positive=True),
        stale_s=optional_number(trig, "stale_s", "triggers.stale_s", 0.5, positive=True),
        stale_topics=stale_topics,
        stale_commands=stale_commands,
        before_engage=before_engage,
    )
