"""IR ops: nn_misc family (being written)."""
