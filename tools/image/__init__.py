"""The parts of tools/image_check.py: buildah calls, the Debian base, pip's build-time settings, the checks.

Nothing here is imported by the shipped package; tools/image_check.py puts the checkout on sys.path.
"""
