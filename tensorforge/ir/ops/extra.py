"""IR ops: extra family (being written)."""
