"""Record a sysid bag: `ros2 launch sim2real sysid_record.launch.py robot:=panda hardware:=topic bag:=bags/p1`.

A thin renderer of sim2real.graph.sysid_recording.make_sysid_plan: the hardware part (sim_robot for
hardware:=sim, nothing for hardware:=topic) and the safety supervisor come from the same
plan bringup.launch.py runs; sysid_logger plays the excitation through the supervisor and
writes the bag. The launch ends when the logger has written the bag.
`ros2 launch sim2real sysid_record.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from sim2real.graph.sysid_recording import SYSID_ARGUMENTS, make_sysid_plan


def _render(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in SYSID_ARGUMENTS}
    plan = make_sysid_plan(**values)
    actions = []
    for spec in plan.nodes:
        node = Node(
            package="sim2real",
            executable=spec.executable,
            name=spec.name,
            parameters=[spec.parameters],
            remappings=list(spec.remappings),
            additional_env=spec.environment,
            output="screen",
        )
        actions.append(node)
        if spec.name == "sysid_logger":
            actions.append(
                RegisterEventHandler(
                    OnProcessExit(target_action=node, on_exit=[EmitEvent(event=Shutdown(reason="sysid bag written"))])
                )
            )
    return actions


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(
            arg.name,
            default_value=arg.default,
            description=arg.description,
            **({"choices": list(arg.choices)} if arg.choices else {}),
        )
        for arg in SYSID_ARGUMENTS.values()
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_render)])
