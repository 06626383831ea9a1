"""What the collect, train and ros parts share: kinematics, CSV schema, checkpoints, metrics."""
