"""`sim2real demo` keeps its DDS traffic on this machine unless the user says otherwise."""

from pathlib import Path
from xml.etree import ElementTree

from sim2real.graph.reported_run import DISCOVERY_RANGE, demo_environment
from sim2real.nodes.dds_transport import (
    PROFILE_VARIABLES,
    RANGE_VARIABLE,
    TRANSPORTS_VARIABLE,
    localhost_profile,
    set_graph_transport,
    transport_environment,
)


def test_the_demo_discovers_on_loopback_by_default(monkeypatch):
    monkeypatch.delenv(DISCOVERY_RANGE, raising=False)
    assert demo_environment() == {DISCOVERY_RANGE: "LOCALHOST"}


def test_a_discovery_range_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv(DISCOVERY_RANGE, "SUBNET")
    assert demo_environment() == {}


PROFILES_VARIABLE, FAST_DDS_2_PROFILES_VARIABLE = PROFILE_VARIABLES


def test_the_graph_uses_udp_unless_the_user_chose_a_transport():
    udp = {TRANSPORTS_VARIABLE: "UDPv4", PROFILES_VARIABLE: None}
    assert transport_environment({}) == udp
    assert transport_environment({RANGE_VARIABLE: "SUBNET"}) == udp
    assert transport_environment({RANGE_VARIABLE: "SUBNET", TRANSPORTS_VARIABLE: "UDPv4"}) == udp
    assert transport_environment({RANGE_VARIABLE: "SUBNET", "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}) == udp
    assert transport_environment({PROFILES_VARIABLE: ""}) == udp
    # on this machine only: the profile that keeps rmw_fastrtps's LOCALHOST setup minus shared memory
    ours = {PROFILES_VARIABLE: localhost_profile(), RANGE_VARIABLE: "SYSTEM_DEFAULT", TRANSPORTS_VARIABLE: None}
    assert transport_environment({RANGE_VARIABLE: "LOCALHOST"}) == ours
    assert transport_environment({RANGE_VARIABLE: "LOCALHOST", TRANSPORTS_VARIABLE: "UDPv4"}) == ours
    assert Path(localhost_profile()).is_file()
    # the user's own choices stay
    assert transport_environment({TRANSPORTS_VARIABLE: "SHM"}) == {}
    assert transport_environment({RANGE_VARIABLE: "LOCALHOST", TRANSPORTS_VARIABLE: "DEFAULT"}) == {}
    assert transport_environment({PROFILES_VARIABLE: "/etc/fastdds.xml"}) == {}
    assert transport_environment({"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/fastdds.xml"}) == {}
    assert transport_environment({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}) == {}
    assert transport_environment({"ROS_LOCALHOST_ONLY": "1"}) == {}
    assert transport_environment({RANGE_VARIABLE: "LOCALHOST", "ROS_STATIC_PEERS": "10.0.0.2"}) == {}


def test_on_fast_dds_2_the_profile_goes_in_the_variable_it_reads():
    for distro in ("humble", "jazzy"):
        assert transport_environment({RANGE_VARIABLE: "LOCALHOST", "ROS_DISTRO": distro}) == {
            FAST_DDS_2_PROFILES_VARIABLE: localhost_profile(),
            RANGE_VARIABLE: "SYSTEM_DEFAULT",
            TRANSPORTS_VARIABLE: None,
        }
        environ = {RANGE_VARIABLE: "LOCALHOST", "ROS_DISTRO": distro}
        set_graph_transport(environ)
        assert transport_environment(environ) == {}
    assert transport_environment({RANGE_VARIABLE: "LOCALHOST", "ROS_DISTRO": "kilted"})[PROFILES_VARIABLE]


def test_a_process_started_from_a_set_up_one_is_set_up_for_its_own_range():
    environ = {RANGE_VARIABLE: "LOCALHOST"}
    set_graph_transport(environ)
    assert transport_environment(environ) == {}  # once is enough
    child = dict(environ)
    set_graph_transport(child)
    assert child == environ
    child[RANGE_VARIABLE] = "LOCALHOST"  # a child given the range again
    set_graph_transport(child)
    assert child == environ
    child[RANGE_VARIABLE] = "SUBNET"  # a child sent to the network: built-in UDP, not the profile
    set_graph_transport(child)
    assert child == {RANGE_VARIABLE: "SUBNET", TRANSPORTS_VARIABLE: "UDPv4"}
    child[RANGE_VARIABLE] = "LOCALHOST"
    set_graph_transport(child)
    assert child == environ
    # the profile as another install of the package names it is still this module's own
    elsewhere = {PROFILES_VARIABLE: "/opt/ros/kilted/share/sim2real/config/dds/localhost_udp.xml"}
    assert transport_environment({**elsewhere, RANGE_VARIABLE: "SYSTEM_DEFAULT"}) == {}
    assert transport_environment({**elsewhere, RANGE_VARIABLE: "SUBNET"}) == {
        TRANSPORTS_VARIABLE: "UDPv4",
        PROFILES_VARIABLE: None,
    }


def test_the_localhost_profile_is_a_fast_dds_profile_without_shared_memory():
    root = ElementTree.parse(localhost_profile()).getroot()
    ns = {"dds": "http://www.eprosima.com"}
    kinds = [t.text for t in root.iterfind(".//dds:transport_descriptor/dds:type", ns)]
    assert kinds == ["UDPv4"]
    assert root.find(".//dds:participant", ns).get("is_default_profile") == "true"
    assert root.find(".//dds:useBuiltinTransports", ns).text == "false"
