"""The Unitree Go2's low-level DDS interface (``rt/lowcmd``, ``rt/lowstate``), ROS-free.

- :mod:`.messages`: the ``unitree_go::msg::dds_`` types, written from the field list Unitree's
  SDK publishes (unitree_sdk2 IDL), for cyclonedds;
- :mod:`.frames`: their C-struct byte layout and the CRC the robot checks on every LowCmd;
- :mod:`.motor_map`: which motor index drives which named joint (the profile's ``unitree:``);
- :mod:`.remote`: the wireless remote's 40 bytes, decoded.
"""
