"""Data loading, IKNet models, training, testing and export; runs without ROS."""
