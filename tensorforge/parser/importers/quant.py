"""Importers: quant family (being written)."""
