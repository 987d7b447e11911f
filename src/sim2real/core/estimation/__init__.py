"""State estimation from proprioception: what the robot cannot measure directly.

Quadruped (:class:`LegKalmanFilter`): the linear Kalman filter legged robots deploy. The
IMU drives the process (its orientation rotates the measured proper acceleration, less the
estimated accelerometer bias, into the world, gravity is removed, the result integrates into
base velocity and position); the
legs measure (pinocchio forward kinematics and Jacobians of the URDF from the joint
states give each foot's position relative to the base and, for a foot standing still,
the base velocity, whose noise carries the encoders' and the gyro's through the leg; a
standing foot's height is the ground's). The state is base position (3) and velocity (3) in
the world frame, the accelerometer's bias (3, body frame) and the four foot positions (12,
world). A foot in
the air is not standing still: its process noise and measurement noise are inflated, so
the filter follows it without believing it. Contact comes from the joint efforts (the
foot force that balances them, with hysteresis) or from a gait clock (:class:`ContactDetector`).

Divergence: every update's innovation is scored by its normalised innovation squared
(NIS, per degree of freedom, over the feet in contact); a filter whose model holds scores
about 1. A window mean above the configured bound (a foot slipping hard, a wrong contact
model, a bad sensor) is divergence, as is a non-finite state or a covariance that grew
past its bound (:class:`DivergenceMonitor`). The node reports it on /diagnostics, where the
safety supervisor reads it.

Arm (:class:`ArmEstimator`): joint position, velocity and acceleration per joint from a
constant-acceleration Kalman filter (encoders measure position and velocity), and the
end-effector pose and twist from pinocchio.

Settings are YAML under ``config/estimation/<robot>.yaml`` (:mod:`.config`); the legged filter
is in :mod:`.legged`, the arm's in :mod:`.arm`, the checked IMU sample both take in
:mod:`.samples`. ROS-free: the ``state_estimator`` node only moves messages in and out.
"""
