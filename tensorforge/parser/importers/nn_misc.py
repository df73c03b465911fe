"""Importers: nn_misc family (being written)."""
