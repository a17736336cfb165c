"""Run by a framework's own interpreter, never imported by the harness: start the framework's trainer module
as `python -m` would, after two small things jaxbench needs from it.

- `--count-params MODULE:FUNCTION`: the framework's own function that counts a parameter tree is wrapped
  so that the exact count it computes is printed (`jaxbench: parameters N`); frameworks log it rounded to
  billions, and jaxbench checks it against the recipe's.
- `{package:NAME}` in an argument becomes that installed package's directory (its bundled configs).

    python launch.py --count-params maxtext.utils.max_utils:calculate_num_params_from_pytree \\
        --module maxtext.trainers.pre_train.train -- {package:maxtext}/configs/base.yml steps=5
"""

import argparse
import functools
import importlib
import re
import runpy
import sys
from pathlib import Path

PARAMETERS_LINE = "jaxbench: parameters {}"


def count_params_through(target: str) -> None:
    module_name, _, function_name = target.partition(":")
    module = importlib.import_module(module_name)
    original = getattr(module, function_name)

    @functools.wraps(original)
    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        count = original(*args, **kwargs)
        print(PARAMETERS_LINE.format(int(count)), flush=True)
        return count

    setattr(module, function_name, counted)


def parameter_count(log: str) -> int | None:
    """For the harness: the first count the wrapped function printed in a trainer's log (the model's
    parameters; later calls may count other trees)."""
    prefix = PARAMETERS_LINE.format("")
    for line in log.splitlines():
        if line.startswith(prefix):
            return int(line.removeprefix(prefix))
    return None


def package_dirs(argument: str) -> str:
    def directory(match: re.Match[str]) -> str:
        package = importlib.import_module(match.group(1))
        return str(Path(package.__file__ or "").parent)

    return re.sub(r"\{package:([A-Za-z0-9_.]+)\}", directory, argument)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count-params", help="MODULE:FUNCTION that returns a parameter count")
    parser.add_argument("--module", required=True, help="the trainer, run as __main__")
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    if args.count_params:
        count_params_through(args.count_params)
    sys.argv = [args.module, *(package_dirs(a) for a in arguments)]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
