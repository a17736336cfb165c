"""The acceptance run of a GPU machine: every recipe at a GPU size (LLaMA 2 1B in bf16 with cuDNN attention
and in fp8, GPT-3 1.3B, ViT-B/16) and the full microbenchmark suite, each in a fresh process with the `auto`
XLA flag profile, then one summary (Markdown and JSON) of the numbers that say whether the machine and the
stack are healthy. The first thing to run on a lent GPU; it needs 9 minutes at the most on one H100.

    jaxbench gpu-check [--steps 30] [--out runs]        # make gpu-check

plan.py says what runs and how (plain data), summary.py turns the files the checks wrote into the summary
(pure), check.py runs the plan through a replaceable runner and writes the summary.
"""

DEFAULT_STEPS = 30
"""Steps per recipe run, warmup included. The recipes warm up for 10 steps, so 20 are timed: enough for a
stable median and interquartile range. At 45 % MFU on one H100 a step takes about 0.25 s (LLaMA 2 1B), 0.6 s
(GPT-3 1.3B) and 0.06 s (ViT-B/16), so the steps of all four runs take under a minute (an estimate from the
FLOP counts, `jaxbench flops`), and the rest of the 9 minutes goes to starting four processes, compiling four
training steps and the microbenchmark suite."""
