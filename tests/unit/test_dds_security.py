"""What the supervisor can tell at start about DDS security from the environment."""

from sim2real.core.dds_security import security_state


def test_an_open_network_is_named():
    state = security_state({})
    assert not state.enabled and "any participant on the domain" in state.describe()


def test_security_on_but_not_enforced_or_without_the_enclave_is_named(tmp_path):
    env = {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Permissive", "ROS_SECURITY_KEYSTORE": str(tmp_path)}
    problems = security_state(env, "/sim2real/safety_supervisor").problems
    assert any("not Enforce" in p for p in problems)
    assert any("no enclave /sim2real/safety_supervisor" in p for p in problems)


def test_enforced_with_the_enclave_is_clean(tmp_path):
    (tmp_path / "enclaves" / "sim2real" / "safety_supervisor").mkdir(parents=True)
    env = {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce", "ROS_SECURITY_KEYSTORE": str(tmp_path)}
    state = security_state(env, "/sim2real/safety_supervisor")
    assert state.problems == () and state.describe().startswith("SROS2 enforced")
