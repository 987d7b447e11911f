from sim2real.core.period_stats import GapFreeStream, PeriodStats


def test_missed_when_work_ends_after_next_period_begins():
    stats = PeriodStats(period=0.002)
    stats.record(deadline=0.000, finished=0.0005)  # on time
    stats.record(deadline=0.002, finished=0.0039)  # late but inside its period
    stats.record(deadline=0.004, finished=0.0065)  # ran into the next period: missed
    assert (stats.ticks, stats.missed) == (3, 1)
    summary = stats.summary()
    assert abs(summary["missed_fraction"] - 1 / 3) < 1e-12
    assert abs(summary["lateness_max_ms"] - 2.5) < 1e-9


def test_a_gap_free_stream_restarts_its_count_after_a_gap():
    stream = GapFreeStream(max_gap=0.05)
    assert stream.steady_for() == 0.0
    for k in range(51):  # 1 s at 50 Hz
        stream.arrived(k * 0.02)
    assert abs(stream.steady_for() - 1.0) < 1e-9
    stream.arrived(1.0 + 0.11)  # a 0.11 s stall, as a runtime starting beside its neighbours had
    assert stream.steady_for() == 0.0
    stream.arrived(1.11 + 0.04)  # a gap within max_gap keeps the run going
    assert abs(stream.steady_for() - 0.04) < 1e-9
