"""Thin rclpy adapters, one node per file. Logic lives in sim2real.core / sim2real.sim."""
