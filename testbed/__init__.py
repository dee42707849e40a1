"""A real inference service with real faults, recorded by the real `diagnose record`, to judge the diagnosis.

See docs/testbed.md. Not part of the installed package: run it from a clone
with ``python -m testbed``.
"""
