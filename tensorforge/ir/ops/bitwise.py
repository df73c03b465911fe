"""IR ops: bitwise family (being written)."""
