"""builtin_interfaces/Time <-> integer nanoseconds (exact, unlike float seconds)."""
from builtin_interfaces.msg import Time

NS_PER_S = 1_000_000_000


def to_msg(nanoseconds: int) -> Time:
    return Time(sec=nanoseconds // NS_PER_S, nanosec=nanoseconds % NS_PER_S)


def to_ns(stamp: Time) -> int:
    return stamp.sec * NS_PER_S + stamp.nanosec
