"""Tools for people changing the kit: `dev check` (every content rule, in one place) and `dev new`
(the skeleton of a new exercise).

It imports the grading pipeline, diagnosis and load to run the rules; never render or cli.
"""
