"""Receipts and stamps on the steady clock: a stepped system clock moves them by at most one read
interval, never by the step."""

from __future__ import annotations

import time

from sim2real.core.steady_time import TIME_ERROR, SteadyLine, SteadyReads, steady_receive_ns, system_clock_synchronised
from sim2real.core.units import NS_PER_S

MS = NS_PER_S // 1000
WALL, STEADY = 1_000 * NS_PER_S, 50 * NS_PER_S


def test_a_receipt_keeps_its_age_on_a_steady_system_clock():
    assert steady_receive_ns(WALL - 3 * MS, WALL, STEADY, STEADY - 50 * MS) == STEADY - 3 * MS
    assert steady_receive_ns(WALL - 3 * MS, WALL, STEADY, None) == STEADY - 3 * MS  # nothing bounds it


def test_a_clock_stepped_forward_after_a_receipt_ages_it_by_one_read_interval_at_most():
    # 2 s too old by the step: held at the previous read (what that read took came before it).
    assert steady_receive_ns(WALL - 3 * MS, WALL + 2 * NS_PER_S, STEADY, STEADY - 50 * MS) == STEADY - 50 * MS


def test_a_clock_stepped_back_after_a_receipt_makes_it_now_not_the_future():
    assert steady_receive_ns(WALL + 3 * MS, WALL, STEADY, STEADY - 50 * MS) == STEADY


class SteppedClock:
    """The system clock, stepped by ``step_ns``."""

    step_ns = 0

    def __call__(self) -> int:
        return time.time_ns() + self.step_ns


def test_the_line_reads_as_system_time_and_goes_on_steadily_through_a_step():
    wall = SteppedClock()
    line = SteadyLine(wall)
    assert abs(line.now_ns() - time.time_ns()) < 50 * MS
    stamp = time.time_ns() - 5 * MS
    before = line.stamp_ns(stamp)
    wall.step_ns = 3 * NS_PER_S  # the system clock jumps 3 s ahead
    assert abs(line.now_ns() - time.time_ns()) < 50 * MS  # the line does not
    # A stamp made on the new time line lands where one made before the step did.
    assert abs(line.stamp_ns(stamp + 3 * NS_PER_S) - before) < 50 * MS
    assert line.receipt_ns(wall() - 2 * MS) <= line.now_ns()


def test_the_kernel_says_whether_the_system_clock_is_synchronised():
    assert system_clock_synchronised(lambda timex: 0) is True  # TIME_OK
    assert system_clock_synchronised(lambda timex: TIME_ERROR) is False
    assert system_clock_synchronised(lambda timex: -1) is None  # the call failed

    def read_only(timex) -> int:  # modes 0 (a zeroed struct timex, 208 bytes on 64-bit Linux): read only
        assert len(timex) >= 208 and not any(bytes(timex))
        return 0

    assert system_clock_synchronised(read_only) is True
    assert system_clock_synchronised() in (True, False, None)  # this machine's own answer, if it gives one


def test_preflight_notes_an_unsynchronised_clock_and_nothing_else(monkeypatch):
    from sim2real.cli.preflight import clock_note
    from sim2real.core import steady_time

    monkeypatch.setattr(steady_time, "system_clock_synchronised", lambda: False)
    assert clock_note().startswith("NOTE the system clock is not synchronised") and "chronyc waitsync" in clock_note()
    for answer in (True, None):
        monkeypatch.setattr(steady_time, "system_clock_synchronised", lambda answer=answer: answer)
        assert clock_note() == ""


def test_reads_hold_each_receipt_no_earlier_than_the_previous_read_began():
    wall = SteppedClock()
    reads = SteadyReads(SteadyLine(wall))
    before = reads.line.now_ns()
    reads.begin()  # the first read: nothing bounds what it takes
    after = reads.line.now_ns()
    assert abs(reads.receipt_ns(wall() - 30 * MS) - (reads.line.now_ns() - 30 * MS)) < 5 * MS
    time.sleep(0.01)
    reads.begin()
    wall.step_ns = 3 * NS_PER_S  # stepped between a receipt and this read: 3 s too old ...
    held = reads.receipt_ns(wall() - 3 * NS_PER_S - 2 * MS)
    assert before <= held <= after  # ... held at the previous read's start
