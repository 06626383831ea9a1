"""What the collect, train and ros parts share: kinematics, CSV schema, checkpoints, metrics."""

import os

# torch's OpenMP threads (GNU libgomp) spin for several ms after each parallel op by default,
# holding the core that the compiled solvers' threads need next: a batched network+refine on 2
# cores spent 16 ms instead of 9 picking hypotheses right after the network. 30,000 spins keep
# back-to-back torch ops as fast (a training step measured the same). libgomp reads it when
# torch loads, so every iknet package imports this first; a value the user set is kept.
os.environ.setdefault('GOMP_SPINCOUNT', '30000')
