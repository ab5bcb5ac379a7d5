"""Per-process isolation of memory shares: one MPS control daemon per shared GPU, and each share's
CDI spec.

Modules, one job each:
- control_daemon: one GPU's nvidia-cuda-mps-control (its folders, start, liveness, commands, stop).
- gpu_daemons: the daemons counted by the shares on each GPU, the watch that restarts a dead one,
  the adoption after a driver restart.
- cdi_spec: a claim's CDI spec (the pipe folder, the share's limits), written and removed.
- share_setup: what a claim's shares need, set up with its Prepare and taken down with its Unprepare
  (the helper's Driver apply, release and adopt).
"""
