"""The sysid recorder's start-up decisions: engage once up, reset one trip, give up with the reason."""

import pytest

from sim2real.sysid.engage_startup import EngageStartup, SupervisorView


def view(mode, trips=0, last_trip="none", **checks):
    return SupervisorView.from_values(
        {"mode": mode, "trips": str(trips), "last_trip": last_trip, **{f"check/{k}": v for k, v in checks.items()}}
    )


def test_it_engages_once_states_arrive_and_the_robot_stood():
    s = EngageStartup(60.0)
    assert s.step(0.0, False, SupervisorView(), False).action == "wait"
    assert "no /safety/status" in s.waiting_for
    assert s.step(1.0, False, view("STANDBY"), False).action == "wait"
    assert "no /joint_states received" in s.waiting_for
    assert s.step(2.0, True, view("STANDBY"), False).reason == "the supervisor is standing the robot up"
    assert s.step(3.0, True, view("STANDBY"), True).action == "engage"
    assert s.step(4.0, True, view("ACTIVE"), True).action == "engaged"


def test_a_trip_before_the_engage_is_reset_once_and_a_second_one_ends_it():
    s = EngageStartup(60.0)
    s.step(0.0, True, view("STANDBY"), False)
    trip = "STANDBY -> DAMPING: joint_states_stale: no /joint_states for 0.064 s (deadline 0.050 s)"
    step = s.step(1.0, True, view("DAMPING", 1, trip), False)
    assert step.action == "reset" and step.first and "tripped before the engage" in step.reason and trip in step.reason
    # The supervisor refuses the reset while its stop lowers the robot: asked again, no give-up.
    waiting = s.step(1.5, True, view("DAMPING", 1, trip), False)
    assert waiting.action == "reset" and not waiting.first
    assert s.step(3.0, True, view("STANDBY", 1, trip), True).action == "engage"
    again = s.step(4.0, True, view("DAMPING", 2, trip), True)
    assert again.action == "give_up" and "tripped again before the engage" in again.reason


def test_a_trip_before_the_recorder_listened_is_reset_too():
    s = EngageStartup(60.0)
    assert s.step(0.0, True, view("DAMPING", 1, "STANDBY -> DAMPING: x"), False).action == "reset"


def test_an_estop_or_an_operators_damp_is_never_reset():
    s = EngageStartup(60.0)
    step = s.step(0.0, True, view("ESTOP", 0), False)
    assert step.action == "give_up" and "never resets an e-stop" in step.reason
    s = EngageStartup(60.0)
    s.step(0.0, True, view("STANDBY", 0), False)
    step = s.step(1.0, True, view("DAMPING", 0), False)  # trips unchanged: an operator's damp
    assert step.action == "give_up" and "an operator damped the robot" in step.reason


def test_the_time_limit_names_what_was_missing():
    s = EngageStartup(5.0)
    s.step(0.0, True, view("STANDBY", 0, imu_stale="FAIL (none): waiting for the first /imu/data"), True)
    s.engage_refusal = "refused: /imu/data is stale"
    step = s.step(6.0, True, view("STANDBY", 0, imu_stale="FAIL (none): waiting for the first /imu/data"), True)
    assert step.action == "give_up" and "not engaged within 5 s" in step.reason
    assert "check imu_stale: FAIL (none): waiting for the first /imu/data" in step.reason
    assert "its last answer to engage: refused: /imu/data is stale" in step.reason
    s = EngageStartup(5.0)
    s.step(0.0, False, view("STANDBY"), False)
    assert "no /joint_states received" in s.step(6.0, False, view("STANDBY"), False).reason
    with pytest.raises(ValueError, match="start_timeout must be > 0"):
        EngageStartup(0.0)


def test_a_trip_between_two_looks_after_the_reset_ends_it():
    """Reset accepted, stood up and tripped again within one poll: the recorder only sees
    DAMPING again, but the trip count moved on."""
    s = EngageStartup(60.0)
    assert s.step(0.0, True, view("DAMPING", 1, "STANDBY -> DAMPING: a"), False).action == "reset"
    step = s.step(0.2, True, view("DAMPING", 2, "STANDBY -> DAMPING: b"), False)
    assert step.action == "give_up" and "tripped again" in step.reason and ": b" in step.reason


def test_a_reset_the_supervisor_keeps_refusing_is_the_reason_given():
    s = EngageStartup(5.0)
    s.step(0.0, True, view("DAMPING", 1, "STANDBY -> DAMPING: a"), False)
    s.reset_refusal = "refused: the fault persists (joint_limits: FR_calf_joint)"
    step = s.step(6.0, True, view("DAMPING", 1, "STANDBY -> DAMPING: a"), False)
    assert step.action == "give_up" and "its last answer to reset: refused: the fault persists" in step.reason


def test_an_engage_refused_for_a_stand_never_reached_is_answered_with_one_reset():
    """A driver that damped mid stand-up leaves the robot short of its stand; the supervisor's
    engage refusal advises a reset (the stand-up again from where it is): asked once, within the
    same budget as a trip's reset, and the refusal is the reason given if it comes again."""
    from sim2real.core.supervisor import RESTART_STAND

    s = EngageStartup(60.0)
    assert s.step(0.0, True, view("STANDBY"), True).action == "engage"
    short = f"RR_calf_joint is 1.22 rad from its stand pose (max 0.7 rad): the robot did not reach its stand; {RESTART_STAND}"
    s.engage_refusal = short
    step = s.step(1.0, True, view("STANDBY"), True)
    assert step.action == "reset" and step.first and short in step.reason
    assert s.step(2.0, True, view("STANDBY"), False).action == "wait"  # standing up again
    assert s.step(5.0, True, view("STANDBY"), True).action == "engage"
    s.engage_refusal = short
    assert s.step(6.0, True, view("STANDBY"), True).action == "engage"  # no second reset
    step = s.step(61.0, True, view("STANDBY"), True)
    assert step.action == "give_up" and short in step.reason
    # A robot that stood and sagged: the advice is a stop first, never the recorder's to give.
    sagged = EngageStartup(60.0)
    sagged.engage_refusal = "... no longer stands; lift it or clear what blocks it, damp, then reset (...)"
    assert sagged.step(0.0, True, view("STANDBY"), True).action == "engage"
