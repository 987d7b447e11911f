import math

import numpy as np
import pytest

from sim2real.core.joint_command import CommandRefused, JointCommandMapper

NAMES = ["a", "b", "c"]


def mapper():
    return JointCommandMapper(NAMES, [0.1, 0.2, 0.3])


def test_full_command_in_any_order_maps_by_name():
    targets = mapper().apply(["c", "a", "b"], [3.0, 1.0, 2.0], [0.3, 0.1, 0.2], [30, 10, 20])
    np.testing.assert_allclose(targets.position, [1, 2, 3])
    np.testing.assert_allclose(targets.velocity, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(targets.effort, [10, 20, 30])


def test_partial_command_keeps_other_joints_and_zeroes_optional_fields():
    m = mapper()
    m.apply(NAMES, [1, 2, 3], [1, 1, 1], [5, 5, 5])
    targets = m.apply(["b"], [9.0])
    np.testing.assert_allclose(targets.position, [1, 9, 3])
    np.testing.assert_allclose(targets.velocity, [1, 0, 1])
    np.testing.assert_allclose(targets.effort, [5, 0, 5])


@pytest.mark.parametrize(
    "names, position, velocity, effort, words",
    [
        (["a", "zzz"], [1, 2], [], [], "unknown joint names ['zzz']"),
        ([], [], [], [], "names no joints"),
        (["a", "a"], [1, 2], [], [], "repeated"),
        (["a", "b"], [1], [], [], "position has 1 values for 2 names"),
        (["a", "b"], [1, 2], [1], [], "velocity has 1 values"),
        (["a", "b"], [1, 2], [], [1, 2, 3], "effort has 3 values"),
        (["a", "b"], [1, math.nan], [], [], "non-finite"),
        (["a"], [1], [math.inf], [], "velocity contains non-finite"),
    ],
)
def test_bad_commands_are_refused_whole_and_targets_keep(names, position, velocity, effort, words):
    m = mapper()
    before = m.targets.copy()
    with pytest.raises(CommandRefused, match=words.replace("[", r"\[").replace("]", r"\]")):
        m.apply(names, position, velocity, effort)
    np.testing.assert_array_equal(m.targets.position, before.position)
    np.testing.assert_array_equal(m.targets.velocity, before.velocity)


def test_without_an_initial_pose_the_first_command_must_name_every_joint():
    """A driver forwarding to hardware: before a full command, unnamed joints have no target
    that is safe to send (a default pose would make them jump)."""
    m = JointCommandMapper(NAMES, None)
    with pytest.raises(CommandRefused, match=r"the first command must name every joint \(missing \['b', 'c'\]\)"):
        m.apply(["a"], [1.0])
    with pytest.raises(CommandRefused, match="non-finite"):
        m.apply(NAMES, [1.0, math.nan, 3.0])  # refused whole: still no full command
    with pytest.raises(CommandRefused, match="must name every joint"):
        m.apply(["a"], [1.0])
    np.testing.assert_allclose(m.apply(["c", "b", "a"], [3.0, 2.0, 1.0]).position, [1, 2, 3])
    np.testing.assert_allclose(m.apply(["b"], [9.0]).position, [1, 9, 3])  # after a full one: fine


def test_the_names_of_the_last_command_are_remembered_and_other_names_checked_again():
    """A driver's commands name the same joints each time: their indices are kept, and a command
    with other names is checked and mapped on its own."""
    m = mapper()
    m.apply(["c", "a", "b"], [3.0, 1.0, 2.0])
    np.testing.assert_allclose(m.apply(["c", "a", "b"], [6.0, 4.0, 5.0]).position, [4, 5, 6])
    with pytest.raises(CommandRefused, match="unknown joint names"):
        m.apply(["c", "a", "zzz"], [0.0, 0.0, 0.0])
    with pytest.raises(CommandRefused, match="repeated"):
        m.apply(["c", "c", "b"], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(m.apply(["b"], [7.0]).position, [4, 7, 6])
    np.testing.assert_allclose(m.apply(["c", "a", "b"], [9.0, 8.0, 7.0]).position, [8, 7, 9])
