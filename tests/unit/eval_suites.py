"""An evaluation suite short enough for tests: a stand, a slow walk and a shove."""

SHORT_SUITE = """
robot: go2
stand_s: 2.5
settle_s: 1.0
takeover_window_s: 1.0
duration: 2.0
targets: {velocity_error: 0.1, yaw_rate_error: 0.1, yaw_rate_floor: 0.05, feet_down: 0.95, drift: 0.05,
          takeover_height: 0.18, estimator_rmse: 0.05}
scenarios:
  - {name: stand_still, command: [0.0, 0.0, 0.0]}
  - {name: forward_0.3, command: [0.3, 0.0, 0.0]}
  - name: shoved
    command: [0.0, 0.0, 0.0]
    pushes: [{at: 1.2, force: [0.0, 60.0, 0.0], duration: 0.2}]
"""
