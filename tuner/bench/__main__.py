"""`python -m tuner.bench`."""

from tuner.bench.cli import main

raise SystemExit(main())
