"""IR ops: reduce family (being written)."""
