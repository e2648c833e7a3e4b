"""`python -m tuner.run`."""

from tuner.run.cli import run_main
from tuner.run.local_ray import finish_quietly

code = run_main()
finish_quietly()  # a signal now must not cut Ray's atexit shutdown short
raise SystemExit(code)
