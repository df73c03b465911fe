"""Importers: ml family (being written)."""
