"""builtin_interfaces/Time <-> integer nanoseconds (exact, unlike float seconds)."""
from builtin_interfaces.msg import Time

NS_PER_S = 1_000_000_000


def to_msg(nanoseconds: int) -> Time:
    return Time(sec=nanoseconds // NS_PER_S, nanosec=nanoseconds % NS_PER_S)


def to_ns(stamp: Time) -> int:
    return stamp.sec * NS_PER_S + stamp.nanosec


def next_period_start_ns(nanoseconds: int, period_ns: int) -> int:
    """The first policy-period boundary after ``nanoseconds``: the nodes tick once per period,
    on the first stamp (or clock reading) at or past it, so ticks stay on the period grid
    whatever the sensing rate and jitter."""
    return (nanoseconds // period_ns + 1) * period_ns
