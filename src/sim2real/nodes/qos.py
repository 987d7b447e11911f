"""QoS chosen per stream, in one place, so publishers and subscribers always match.

Sensors are published reliable (like ros2_control's joint_state_broadcaster, so any
subscriber matches) and subscribed best-effort (sensor-data style: take what arrives,
never stall the publisher). Commands are reliable with depth 1: only the newest
command matters, and it must not be dropped silently.
"""

from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

SENSOR_PUBLISH = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.VOLATILE,
)
# Sensor-data QoS (best effort), but deeper than its depth of 5: lockstep delivers a whole
# command period of 500 Hz samples (10 and more) in one burst, and none should be lost.
SENSOR_SUBSCRIBE = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=50,
    reliability=QoSReliabilityPolicy.BEST_EFFORT,
    durability=QoSDurabilityPolicy.VOLATILE,
)
COMMAND = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.VOLATILE,
)
# Reliable so that every subscriber matches (rclpy's own /clock subscription is best-effort).
CLOCK = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.VOLATILE,
)
