"""Importers: control family (being written)."""
