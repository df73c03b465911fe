"""Importers: sequence family (being written)."""
