"""How long the tests wait for nodes; the processes themselves are started and ended by
iknet_ros.server_processes.ProcessGroup (the demo's and service_bench's too)."""

# How long a test waits for a node's services: a server's first start on a cold numba cache
# compiles its kernels (about a minute, several on a busy 2-core machine; the wait ends as soon
# as they are up).
NODE_START_S = 300.0
