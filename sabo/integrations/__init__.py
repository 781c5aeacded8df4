"""Adapters that expose SABO to other optimization libraries; each imports its library and is imported
explicitly (``import sabo.integrations.nevergrad``), so ``sabo`` itself requires none of them."""
