"""IR ops: signal family (being written)."""
