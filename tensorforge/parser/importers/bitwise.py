"""Importers: bitwise family (being written)."""
