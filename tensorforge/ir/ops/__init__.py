"""Built-in IR ops, one family per module. Importing this package registers them all (explicit list)."""

from . import elementwise  # noqa: F401
from . import activation  # noqa: F401
