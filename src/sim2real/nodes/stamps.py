"""builtin_interfaces/Time <-> integer nanoseconds (exact, unlike float seconds)."""

from builtin_interfaces.msg import Time

from sim2real.core.units import NS_PER_S  # also stamps.NS_PER_S, for the nodes


def to_msg(nanoseconds: int) -> Time:
    return Time(sec=nanoseconds // NS_PER_S, nanosec=nanoseconds % NS_PER_S)


def to_ns(stamp: Time) -> int:
    return stamp.sec * NS_PER_S + stamp.nanosec


def next_period_start_ns(nanoseconds: int, period_ns: int) -> int:
    """The first policy-period boundary after ``nanoseconds``: the nodes tick once per period,
    on the first stamp (or clock reading) at or past it, so ticks stay on the period grid
    whatever the sensing rate and jitter."""
    return (nanoseconds // period_ns + 1) * period_ns


def jumped_back(nanoseconds: int, next_tick_ns: int, period_ns: int) -> bool:
    """More than two periods before the next tick: a new time line (a robot or sim that
    restarted, a system clock stepped back by NTP), not jitter or reordered stamps."""
    return nanoseconds < next_tick_ns - 2 * period_ns


def tick_due(nanoseconds: int, next_tick_ns: int, period_ns: int) -> bool:
    """Whether a tick is due at ``nanoseconds`` (a stamp or clock reading): at or past the next
    tick, or on a new time line (:func:`jumped_back`): waiting for the old one would send
    nothing for as long as the jump."""
    return nanoseconds >= next_tick_ns or jumped_back(nanoseconds, next_tick_ns, period_ns)


class RepeatedStamps:
    """Spots a driver that does not stamp its states, for a node whose clock is their stamps."""

    LIMIT = 100  # states in a row with one stamp (0.2 s at 500 Hz)

    def __init__(self):
        self._last: int | None = None
        self._count = 0

    def stuck(self, nanoseconds: int) -> bool:
        """True once, when the stamp has repeated LIMIT times in a row."""
        self._count = self._count + 1 if nanoseconds == self._last else 0
        self._last = nanoseconds
        return self._count == self.LIMIT
