"""Test-wide settings: keep DDS traffic on this machine and away from other runs."""
import os
import random

# A random domain per test session: two test runs (or a demo) on one machine never
# see each other's topics. Set before any test imports rclpy or starts a node.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(20, 99)))
# Discovery on loopback only: tests never send DDS traffic off this machine.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
