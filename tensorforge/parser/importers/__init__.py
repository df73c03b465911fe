"""Built-in importers, one op family per module. Importing this package registers them (explicit list)."""

from . import elementwise  # noqa: F401
from . import constants  # noqa: F401
