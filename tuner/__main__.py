"""`python -m tuner` is `python -m tuner.run`."""

from tuner.run import main

raise SystemExit(main())
