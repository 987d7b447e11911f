"""ROS-free runtime logic. Nothing under this package may import rclpy."""
