"""IR ops: conv family (being written)."""
