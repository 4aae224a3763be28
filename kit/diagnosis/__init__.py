"""Diagnose: which known bugs explain a failing solution, by a search over bug models composed on the
reference. Imports compare, report and load; never the pipeline above it or any terminal code.
"""
