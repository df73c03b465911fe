"""IR ops: quant family (being written)."""
