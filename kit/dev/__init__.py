"""Tools for people changing the kit: `dev check` (every content rule, in one place), `dev new`
(the skeleton of a new exercise), `dev update` (the README's tables, docs/catalogue.md) and
`dev split` (an exercise's block of the shared catalogue files moved into its own file).

It imports the grading pipeline, diagnosis and load to run the rules; never render or cli.
"""
