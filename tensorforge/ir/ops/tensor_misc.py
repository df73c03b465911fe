"""IR ops: tensor_misc family (being written)."""
