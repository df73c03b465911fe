"""Importers: pool family (being written)."""
