"""The vocabulary every jaxbench package shares, beneath all of them: the error types and the exit codes they
map to, strict date parsing, and the frozen, strict base of every schema. Imports nothing of jaxbench and no
JAX, database or subprocess.
"""
