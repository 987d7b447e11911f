"""Bring up sim2real for one robot: `ros2 launch sim2real bringup.launch.py robot:=go2 hardware:=sim`.

A thin renderer: the node plan comes from sim2real.graph.plan.make_plan, the same plan
`sim2real up` runs. Only stable launch / launch_ros APIs are used (DeclareLaunchArgument,
OpaqueFunction, LaunchConfiguration, launch_ros.actions.Node), available on Humble,
Jazzy and Kilted. `ros2 launch sim2real bringup.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from sim2real.graph.plan import LAUNCH_ARGUMENTS, make_plan


def _render(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    plan = make_plan(**values)
    return [
        Node(
            package="sim2real",
            executable=spec.executable,
            name=spec.name,
            parameters=[spec.parameters],
            remappings=list(spec.remappings),
            additional_env=spec.environment,
            output="screen",
        )
        for spec in plan.nodes
    ]


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(
            arg.name,
            default_value=arg.default,
            description=arg.description,
            **({"choices": list(arg.choices)} if arg.choices else {}),
        )
        for arg in LAUNCH_ARGUMENTS.values()
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_render)])
