"""System identification: excitation design, bag -> dataset, simulator and rigid-body fits,
identified parameters -> re-centred randomization. ROS-free (the recorder node wraps it)."""
