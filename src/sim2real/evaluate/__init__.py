"""Metrics, reports and plots."""
