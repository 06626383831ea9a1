# The two commands of a fresh machine; each sets itself up first (tools/setup.sh, idempotent).
.PHONY: demo test

# The main job: what a user does with iknet, end to end.
demo:
	bash tools/demo.sh

# Lint and every test, against real rclpy over loopback DDS.
test:
	bash tools/test.sh
