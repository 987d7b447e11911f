"""Unit constants shared across the project, defined once."""

NS_PER_S = 1_000_000_000  # nanoseconds in a second: ROS stamps, rosbag2 times, time.time_ns()
