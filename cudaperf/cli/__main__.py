"""python -m cudaperf.cli: the same command line as ``cudaperf`` (benchmarks/device_session.sh runs it this way)."""

import sys

from cudaperf.cli import app

sys.exit(app())
