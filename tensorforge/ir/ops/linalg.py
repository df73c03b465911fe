"""IR ops: linalg family (being written)."""
