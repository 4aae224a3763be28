"""The check pipeline: load -> sandbox -> compare -> diagnose -> report, as one call
(pipeline.grade), plus what builds on a finished grading: --locate's verified edit and the mock's
rubric. It imports the stages below it and never rich or click.
"""
