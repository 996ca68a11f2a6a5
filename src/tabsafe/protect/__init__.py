"""Post-tabular protection methods, one module per family (cell key, rounding, suppression, ...)."""
