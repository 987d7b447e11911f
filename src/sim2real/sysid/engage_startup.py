"""The sysid recorder's start-up, ROS-free: when to engage the supervisor, reset it, or give up.

A recording asks the safety supervisor to engage once the graph is up: the robot's states
arrive, the supervisor reports and has had the time to stand the robot up; the supervisor's
engage then checks the rest (fresh states, the stand pose reached, a live command stream). A supervisor that tripped before the engage (a late sample while a loaded machine
starts its nodes) is reset once, and the log says so; a second trip, an e-stop or an
operator's damp ends the start-up. So does the time limit, with the reason the robot was not
engaged (the supervisor's failing check, its refusal of the engage, or the silence of a
topic), never a guess. An engage refused because the robot never reached its stand (its driver
damped mid stand-up) is answered, within the same one reset, as the supervisor advises: a reset,
which stands the robot up again from where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from sim2real.core.supervisor import RESTART_STAND


@dataclass
class SupervisorView:
    """What the supervisor's last /safety/status said."""

    mode: str = ""
    last_trip: str = ""
    trips: int | None = None
    failing: dict[str, str] = field(default_factory=dict)  # check name -> its FAIL text

    @classmethod
    def from_values(cls, values: Mapping[str, str]) -> "SupervisorView":
        try:
            trips = int(values.get("trips", ""))
        except ValueError:
            trips = None
        last_trip = values.get("last_trip", "")
        return cls(
            mode=values.get("mode", ""),
            last_trip="" if last_trip == "none" else last_trip,
            trips=trips,
            failing={k[len("check/") :]: v for k, v in values.items() if k.startswith("check/") and v != "ok"},
        )


@dataclass(frozen=True)
class Step:
    action: str  # wait | engage | reset | engaged | give_up
    reason: str = ""
    first: bool = False  # the first answer of a reset: the one to tell the operator about


class EngageStartup:
    """Call :meth:`step` periodically until it answers ``engaged`` or ``give_up``."""

    def __init__(self, timeout_s: float, resets: int = 1):
        if not timeout_s > 0:
            raise ValueError(f"start_timeout must be > 0 s, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.resets_left = resets
        self.started: float | None = None
        self.waiting_for = "nothing yet"
        self.engage_refusal = ""  # the supervisor's last answer to an engage that failed
        self.reset_refusal = ""  # ... and to a reset
        self._trips_before: int | None = None  # trips in the last status that was not DAMPING
        self._resetting = False  # a reset asked, the supervisor still in DAMPING

    def step(self, now: float, states_seen: bool, view: SupervisorView, stood: bool) -> Step:
        """``now``: wall seconds; ``states_seen``: /joint_states arrived; ``stood``: the recorder's
        stand wait (the supervisor's stand-up duration on the states' clock) has passed. A
        ``reset`` answer repeats until the supervisor leaves DAMPING (it refuses a reset while
        its stop is still under way): the caller spaces the calls."""
        if self.started is None:
            self.started = now
        if view.mode == "ACTIVE":
            return Step("engaged")
        if view.mode == "ESTOP":
            return Step(
                "give_up",
                f"the supervisor is in ESTOP ({view.last_trip or 'an operator e-stop'}); the "
                "recorder never resets an e-stop: clear its cause, reset it "
                "(sim2real safety reset) and record again",
            )
        if now - self.started > self.timeout_s:
            return self._given_up()
        if view.mode == "DAMPING":
            return self._on_damping(view)
        self._resetting = False
        if view.trips is not None:
            self._trips_before = view.trips
        if view.mode == "STANDBY" and RESTART_STAND in self.engage_refusal and self.resets_left > 0:
            # The robot never reached its stand (its driver damped mid stand-up, say): the
            # supervisor's advice is a reset, which stands it up again from where it is.
            self.resets_left -= 1
            refusal, self.engage_refusal = self.engage_refusal, ""
            return Step("reset", f"the supervisor refused the engage ({refusal}): resetting it once", first=True)
        ready, self.waiting_for = self._readiness(view, states_seen, stood)
        return Step("engage") if ready else Step("wait", self.waiting_for)

    def _given_up(self) -> Step:
        refusal = f"; its last answer to engage: {self.engage_refusal}" if self.engage_refusal else ""
        if self._resetting and self.reset_refusal:
            refusal = f"; its last answer to reset: {self.reset_refusal}"
        return Step("give_up", f"the robot was not engaged within {self.timeout_s:g} s: {self.waiting_for}{refusal}")

    def _on_damping(self, view: SupervisorView) -> Step:
        """The supervisor damps before the engage: reset once after a trip, never after an operator's damp."""
        if self._resetting:
            if view.trips is not None and self._trips_before is not None and view.trips > self._trips_before:
                # Reset, stood up and tripped again between two looks.
                return Step("give_up", f"the supervisor tripped again before the engage: {view.last_trip}")
            self.waiting_for = f"the supervisor to leave DAMPING after the reset ({view.last_trip})"
            return Step("reset", self.waiting_for)
        # A trip counts in `trips`; an operator's damp does not. The reference is the count
        # in the last status before the damping (0 if the first status heard is DAMPING).
        if (view.trips or 0) <= (self._trips_before or 0):
            return Step("give_up", "an operator damped the robot before the engage; record again when ready")
        if self.resets_left <= 0:
            return Step("give_up", f"the supervisor tripped again before the engage: {view.last_trip}")
        self.resets_left -= 1
        self._resetting = True
        self._trips_before = view.trips
        self.waiting_for = f"the supervisor to leave DAMPING after the reset ({view.last_trip})"
        return Step(
            "reset", f"the supervisor tripped before the engage ({view.last_trip}): resetting it once", first=True
        )

    @staticmethod
    def _readiness(view: SupervisorView, states_seen: bool, stood: bool) -> tuple[bool, str]:
        """(time to engage, what the recorder waits for)."""
        if not view.mode:
            return False, "no /safety/status from the supervisor (is safety_supervisor running?)"
        if not states_seen:
            return False, "no /joint_states received (is the robot's driver running and publishing?)"
        if not stood:
            return False, "the supervisor is standing the robot up"
        # The supervisor's engage decides whether the graph is healthy (fresh states, the
        # stand pose reached, the policy stream live): its refusal and a failing check say why.
        failing = "; ".join(f"check {name}: {text}" for name, text in view.failing.items())
        return True, f"the supervisor in {view.mode} has not engaged" + (f" ({failing})" if failing else "")
