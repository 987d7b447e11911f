"""Training: gymnasium tasks, curricula, adaptive randomization, PPO, ONNX export.

Imports flow train -> sim -> core; nothing here imports rclpy.
"""

import os

# The PPO update runs on as many threads as the machine leaves idle (runner.update_threads),
# so a run's weights must not depend on the thread count. MKL's matrix products split their
# sums by thread on AVX-512 processors (1 and 2 threads gave other weights there); its strict
# conditional numerical reproducibility mode keeps them bitwise equal, for ~5-10 % of the
# update's time. MKL reads this at its first call: set here, before any torch product runs
# in a process that trains. A value the user set wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
