"""Triage of a nightly throughput regression: reproduce it, find the component, bisect its commits.

`triage.logic` holds the decisions as pure functions; running stacks and reading git stay with the caller.
"""
