"""Service queues deep enough that no IK request or answer is dropped under load.

DDS (Fast DDS, the default RMW) sends every service answer to every client of that service, and
each client keeps them in its own queue. With the ROS default depth of 10, a client busy for a
moment while others are answered loses its own answer to theirs: 8 clients sending 200 requests
each lost a few answers per run. A depth of 1000 lost none. Clients of ik_server should use
SERVICE_QUEUE_QOS too.
"""

from rclpy.qos import QoSProfile, ReliabilityPolicy

# Requests waiting at the server, answers waiting at each client: reliable, 1000 deep.
SERVICE_QUEUE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
