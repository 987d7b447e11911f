"""`sim2real demo` keeps its DDS traffic on this machine unless the user says otherwise."""

from sim2real.graph.reported_run import DISCOVERY_RANGE, demo_environment


def test_the_demo_discovers_on_loopback_by_default(monkeypatch):
    monkeypatch.delenv(DISCOVERY_RANGE, raising=False)
    assert demo_environment() == {DISCOVERY_RANGE: "LOCALHOST"}


def test_a_discovery_range_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv(DISCOVERY_RANGE, "SUBNET")
    assert demo_environment() == {}
