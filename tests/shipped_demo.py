"""What the shipped Go2 policy does in the lockstep sim demo, for tests that compare another path
to it (the Go2 double through the bridge, in real time).

Lockstep repeats itself closely: `sim2real demo --robot go2 --lockstep --no-video` reports the
distance within 0.03 % run after run on one machine. tests/e2e/test_demo.py holds this
figure to that run within 2 %, so a new shipped policy that walks another distance fails there
first, naming this constant.
"""

# distance_m of `sim2real demo --robot go2 --lockstep --no-video` with policies/go2_walk.onnx
# (sha256 8e60cb8baaf6...): 12.297-12.299 m over the 30 s walk script in two runs.
SIM_DEMO_DISTANCE_M = 12.298
# The same run's trunk path over the script's first 16 s (standing still, forward at 0.5 m/s, the
# first 3 s of the turn), from its report.npz: 6.576-6.578 m. What the bridge test walks.
SIM_DEMO_FIRST_16S_DISTANCE_M = 6.577
