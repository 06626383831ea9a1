"""Recording demonstrations: the simulated OM-X controller and the recorder node."""
