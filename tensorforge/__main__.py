"""`python -m tensorforge ...` is the `tensorforge` command."""

import sys

from .cli.main import main

sys.exit(main())
