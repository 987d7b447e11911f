#!/usr/bin/env bash
# Source ROS 2 and the sim2real workspace, then run the given command.
set -e
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /opt/sim2real/install/setup.bash
exec "$@"
