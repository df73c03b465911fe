"""IR ops: shape family (being written)."""
