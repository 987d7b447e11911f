"""The node graph without ROS: its plan (rendered by the launch files and `sim2real up`), the
processes that run a plan, the sysid recording plan, and the runs built on them."""
