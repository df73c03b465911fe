"""IR ops: sequence family (being written)."""
