"""bag_recorder: records the robot's topics into one rosbag2 bag for as long as the graph runs.

Plain operation on the robot, kept whole: the robot data that training on robot data
(``sim2real train --robot-buffer DIR``) rebuilds observations and demonstrations from, and
any later look at a run. The topics are the failure collector's (``config/failures/default.yaml``:
sensors, commands of the policy, the operator and the supervisor, supervisor status,
diagnostics, state estimate, /cmd_vel, /goal_pose), subscribed raw: the CDR bytes go into the
bag as they came. Like the failure collector, the subscriptions are polled by a timer, not
spun, so nothing wakes per message; each drain writes the messages received before it began,
in receive order (with sim time, mapped onto the sim clock), and keeps the rest for the next.
The bag is complete (metadata.yaml written) when the node stops.

    ros2 launch sim2real bringup.launch.py policy:=policies/go2_walk.onnx record:=bags/walk_1
    ros2 run sim2real bag_recorder --ros-args -p robot:=go2 -p bag:=bags/walk_1
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import NoReturn

from rclpy.node import Node

from sim2real.core.bags import BagWriter
from sim2real.core.failure_capture import wall_to_clock
from sim2real.core.failure_config import load_failure_config
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle
from sim2real.nodes.failure_collector import RECORD_QOS, message_class
from sim2real.nodes.params import declare
from sim2real.nodes.polled import PolledSubscription, companion_node

POLL_PERIOD_S = 0.05


class BagRecorderNode(Node):
    def __init__(self, **kwargs):
        super().__init__("bag_recorder", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path (written into the bag)")
        bag = declare(self, "bag", "", "The bag directory to write (it must not exist yet)")
        config_name = declare(
            self,
            "failure_config",
            "default",
            "Whose topics to record: a failure collector config (name under config/failures/ or a path)",
        )
        if not bag:
            raise ValueError("parameter bag is empty: give the bag directory to write (-p bag:=bags/run_1)")
        profile = load_profile(robot)
        topics = load_failure_config(config_name).topics
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self.path = Path(bag).expanduser().absolute()
        self._bag = BagWriter(
            self.path,
            {
                "robot": profile.name,
                "recorder": "sim2real bag_recorder",
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            },
        ).open()
        for spec in topics:
            self._bag.add_topic(spec.topic, spec.msgtype)
        self._recording = companion_node(self, "recording")
        self._recorded = [
            (
                spec.topic,
                PolledSubscription(
                    self._recording, self, message_class(spec.msgtype), spec.topic, RECORD_QOS, raw=True
                ),
            )
            for spec in topics
        ]
        self._held: list[tuple[int, str, bytes]] = []  # received after the last drain began
        self._clock_pair: tuple[int, int] | None = None
        self.messages = 0
        self.create_timer(POLL_PERIOD_S, self._drain)
        self.get_logger().info(f"recording {len(topics)} topics into {self.path}")

    def _drain(self, final: bool = False) -> None:
        """Write every message received before this drain began, oldest first."""
        wall_now = time.time_ns()
        taken = self._held
        for topic, sub in self._recorded:
            taken.extend((min(received, wall_now), topic, data) for data, received in sub.take_all())
        taken.sort(key=lambda item: item[0])
        cut = len(taken) if final else next((i for i, item in enumerate(taken) if item[0] >= wall_now), len(taken))
        ready, self._held = taken[:cut], taken[cut:]
        to_clock = None
        if self._sim_time:
            sim_now = self.get_clock().now().nanoseconds
            pair, self._clock_pair = self._clock_pair, (wall_now, sim_now)
            to_clock = wall_to_clock(pair, wall_now, sim_now)
        for t_ns, topic, data in ready:
            self._bag.write_raw(topic, to_clock(t_ns) if to_clock else t_ns, data)
        self.messages += len(ready)

    def destroy_node(self) -> None:
        try:
            self._drain(final=True)
        finally:
            self._bag.close()
            self.get_logger().info(f"{self.messages} messages in {self.path}")
            self._recording.destroy_node()
            super().destroy_node()


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("bag_recorder", BagRecorderNode, args))


if __name__ == "__main__":
    main()
