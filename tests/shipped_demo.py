"""What the shipped Go2 policy does in the lockstep sim demo, for tests that compare another path
to it (the Go2 double through the bridge, in real time).

Lockstep is deterministic: `sim2real demo --robot go2 --lockstep --no-video` reports the same
distance to the last digit run after run on one machine. tests/e2e/test_demo.py holds this
figure to that run within 2 %, so a new shipped policy that walks another distance fails there
first, naming this constant.
"""

# distance_m of `sim2real demo --robot go2 --lockstep --no-video` with policies/go2_walk.onnx
# (sha256 0d9f26f1b45a...): 11.8747 m over the 30 s walk script (50 Hz samples: 11.8730 m).
SIM_DEMO_DISTANCE_M = 11.875
# The same run's trunk path over the script's first 16 s (standing still, forward at 0.5 m/s, the
# first 3 s of the turn), from its report.npz: 6.377 m. What the bridge test walks.
SIM_DEMO_FIRST_16S_DISTANCE_M = 6.377
