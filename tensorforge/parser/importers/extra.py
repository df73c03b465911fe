"""Importers: extra family (being written)."""
