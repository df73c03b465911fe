"""IR ops: pool family (being written)."""
