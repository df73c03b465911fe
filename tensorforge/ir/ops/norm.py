"""IR ops: norm family (being written)."""
