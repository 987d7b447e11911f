"""Bring up sim2real for one robot: `ros2 launch sim2real bringup.launch.py robot:=go2 hardware:=sim`.

A thin renderer: the node plan comes from sim2real.graph.plan.make_plan, the same plan
`sim2real up` runs. Only stable launch / launch_ros APIs are used (DeclareLaunchArgument,
OpaqueFunction, LaunchConfiguration, LogInfo, RegisterEventHandler, OnShutdown,
launch_ros.actions.Node), available on Humble, Jazzy and Kilted.
`ros2 launch sim2real bringup.launch.py --show-args` lists the arguments.
"""

import tempfile
from pathlib import Path

import yaml
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnShutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from sim2real.graph.plan import LAUNCH_ARGUMENTS, make_plan


def _render(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    plan = make_plan(**values)
    cautions = [LogInfo(msg=f"warning: {caution}") for caution in plan.cautions]
    return cautions + [action for spec in plan.processes() for action in _process(spec)]


def _process(spec):
    if not spec.composed:
        node = spec.members[0]
        return [
            Node(
                package="sim2real",
                executable=node.executable,
                name=node.name,
                parameters=[node.parameters],
                remappings=list(node.remappings),
                additional_env=spec.environment,
                output="screen",
            )
        ]
    # composed:=true: the chain's nodes in one process keep their own names (no name= here, which
    # would rename them all) and read their parameters from one file keyed by node name.
    params = tempfile.NamedTemporaryFile("w", prefix="sim2real-chain-", suffix=".yaml", delete=False)
    with params:
        yaml.safe_dump(spec.parameters_document(), params)
    chain = Node(
        package="sim2real",
        executable=spec.executable,
        arguments=list(spec.arguments),
        parameters=[params.name],
        remappings=list(spec.remappings),  # each scoped to its member: node:from -> to
        additional_env=spec.environment,
        output="screen",
    )
    # rcl reads the file as the process starts; it is removed when the launch shuts down.
    return [chain, RegisterEventHandler(OnShutdown(on_shutdown=lambda event, context: _remove(params.name)))]


def _remove(path):
    Path(path).unlink(missing_ok=True)


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
