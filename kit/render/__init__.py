"""Render: everything the terminal shows, and the only package that imports rich. It receives
finished records from the packages below and never grades, records or prompts.
"""
