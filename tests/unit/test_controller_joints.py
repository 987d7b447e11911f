"""Mapping /joint_commands onto a ros2_control forward_command_controller's joint order."""

import pytest

from sim2real.core.controller_joints import ControllerJointOrder, ControllerJointsError, parse_joint_list


def test_targets_come_out_in_the_controllers_order():
    order = ControllerJointOrder(["a", "b", "c"], ["c", "a", "b"])
    assert order.to_controller([1.0, 2.0, 3.0]) == [3.0, 1.0, 2.0]


def test_no_controller_joints_means_the_profile_order():
    assert ControllerJointOrder(["a", "b"]).to_controller([1.0, 2.0]) == [1.0, 2.0]


@pytest.mark.parametrize(
    "controller, words",
    [
        (["a", "b"], "missing profile joints ['c']"),
        (["a", "b", "c", "gripper"], "joints the profile does not have ['gripper']"),
        (["a", "b", "c", "a"], "repeated joints ['a']"),
    ],
)
def test_a_controller_that_is_not_the_profile_is_refused_with_the_difference(controller, words):
    with pytest.raises(ControllerJointsError) as info:
        ControllerJointOrder(["a", "b", "c"], controller)
    assert words in str(info.value) and "Fix:" in str(info.value)


def test_wrong_number_of_values_is_an_error():
    with pytest.raises(ValueError, match="expected 3 values"):
        ControllerJointOrder(["a", "b", "c"]).to_controller([1.0])


@pytest.mark.parametrize(
    "text, names",
    [
        ("", []),
        ("a,b", ["a", "b"]),
        (" [a, 'b' , c] ", ["a", "b", "c"]),
    ],
)
def test_joint_lists_parse_from_launch_arguments(text, names):
    assert parse_joint_list(text) == names
