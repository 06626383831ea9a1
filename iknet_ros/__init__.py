"""The IK server node and its command-line client."""
