"""Environment variables a launcher (`sim2real up`, `sim2real demo`) sets for the nodes it starts.

A module of its own, with no imports: every node process reads it, and none should load the
launcher's code to do so."""

# The launcher's pid: a node stops when that process dies (nodes.lifecycle.stop_with_launcher).
LAUNCHER_PID_ENV = "SIM2REAL_LAUNCHER_PID"

# The plan's real-time request for one node (core.realtime.RealtimeRequest.encode), set with
# realtime:=true; the node applies it once it is built (nodes.lifecycle.run).
REALTIME_ENV = "SIM2REAL_REALTIME"
