"""Batch grading for courses and hiring teams: a folder of submissions graded exactly as `check` grades
one file, the result files (CSV, JSON, JUnit, Gradescope, PrairieLearn) and the autograder bundle.

It imports the grading pipeline and the records below it; never render, cli or practice.
"""
