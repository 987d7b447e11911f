"""Training: gymnasium tasks, curricula, adaptive randomization, PPO, ONNX export.

Imports flow train -> sim -> core; nothing here imports rclpy.
"""
