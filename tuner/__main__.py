"""`python -m tuner` is `python -m tuner.run`."""

from tuner.run.cli import main

raise SystemExit(main())
