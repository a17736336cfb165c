"""`jaxbench pr-check`: a change against its base, measured in pairs on one machine and judged before it
merges. verdict.py decides, sides.py builds the two stacks, commands.py runs them and writes the
verdict."""
