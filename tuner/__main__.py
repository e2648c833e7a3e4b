"""`python -m tuner` is `python -m tuner.run`."""

from tuner.common.prog import invoked_as
from tuner.run.cli import main

invoked_as("run", "python -m tuner")

raise SystemExit(main())
