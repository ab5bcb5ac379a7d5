"""Time-slicing: replicas of a GPU as separate devices (issue: sharing). Sees value types only.

Not built yet: sharing.timeSlicing in the config is refused by this version.
"""
