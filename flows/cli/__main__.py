"""`python -m flows.cli ARGS`: the same as the console script `sieve ARGS`."""

from flows.cli import main

main()
