"""IR ops: random family (being written)."""
