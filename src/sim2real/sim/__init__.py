"""ROS-free simulation: PyBullet world, actuator model and physical conditions.

Nothing under this package may import rclpy.
"""
