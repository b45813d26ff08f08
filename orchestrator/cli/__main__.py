"""`python -m orchestrator.cli ...` is `reprogrid ...`."""

import sys

from orchestrator.cli.main import main

sys.exit(main())
