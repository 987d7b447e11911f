from sim2real.core.period_stats import PeriodStats


def test_missed_when_work_ends_after_next_period_begins():
    stats = PeriodStats(period=0.002)
    stats.record(deadline=0.000, finished=0.0005)  # on time
    stats.record(deadline=0.002, finished=0.0039)  # late but inside its period
    stats.record(deadline=0.004, finished=0.0065)  # ran into the next period: missed
    assert (stats.ticks, stats.missed) == (3, 1)
    summary = stats.summary()
    assert abs(summary["missed_fraction"] - 1 / 3) < 1e-12
    assert abs(summary["lateness_max_ms"] - 2.5) < 1e-9
