"""IR ops: control family (being written)."""
