#!/usr/bin/env python3
"""Runs the test modules named on the command line (dotted, relative to tests/),
or every tests.py below tests/, with unittest's verbose runner.

Accepts the options of the project's CI (--verbosity, --settings, --parallel)."""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("labels", nargs="*")
    parser.add_argument("--verbosity", type=int, default=1)
    parser.add_argument("--settings", default=None)
    parser.add_argument("--parallel", default=None)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    loader = unittest.TestLoader()
    if args.labels:
        suite = loader.loadTestsFromNames(args.labels)
    else:
        suite = loader.discover(HERE, pattern="tests.py", top_level_dir=HERE)
    print(f"Testing against the package in {os.path.dirname(HERE)}", file=sys.stderr)
    result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
