"""Importers: tensor_misc family (being written)."""
