"""IR ops: indexing family (being written)."""
