"""IR ops: detection family (being written)."""
