"""IR ops: fused family (being written)."""
