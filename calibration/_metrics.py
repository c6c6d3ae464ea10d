"""Calibration metrics on arrays (rule 6, 7).

STUB: signatures fixed; implementation pending.
"""
