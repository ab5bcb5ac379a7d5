"""The fake machine: the one fake in the project, a model of a whole node loaded from a machine
description.

Modules: machine (FakeNvml: the NvmlBackend protocol over a description), faults (injected faults
and events), mig (MIG layouts that can be changed at run time), description (the YAML machine
description, parsed with its fields', links', NICs', fabric's and MIG's parts in the *_description
modules and description_fields), catalog (the shipped machines by name, or a description file by
path).
"""
