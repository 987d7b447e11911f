"""sim2real: train a robot policy in PyBullet and run it on hardware under ROS 2."""

__version__ = "0.1.0"
