"""Batch grading for courses and hiring teams: a folder of submissions graded exactly as `check` grades
one file, the result files (CSV, JSON, JUnit, Gradescope, PrairieLearn) and the autograder bundle.

discover finds the submissions (files, folders, zips, Gradescope's export); run grades them in
grader processes; formats/ holds one writer module per output format (its name declared there
once); outputs writes them without following links.

It imports the grading pipeline and the records below it; never render, cli or practice.
"""
