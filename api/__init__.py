"""The kubelet device-plugin API v1beta1: the .proto and its generated stubs.

Regenerate with `make proto`; tests/api/test_generated_stubs.py proves the committed stubs match.
Only device_plugin.server, .registration, .lifecycle and the kubelet stand-in import this package.
"""
