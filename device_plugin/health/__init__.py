"""health: whether each physical GPU is fit to hand out, from NVML events and probes.

state is the pure two-way state machine (faults, quiet-period recovery) that yields typed
HealthTransitions; watcher runs the event and probe threads over an NVML HealthSource and tells its
listeners; config is the `health` section of the config (it sits in the config layer); fake_events
feeds faults from a file into a simulated machine. Health knows nothing of resources or metrics.
"""
