"""The `sim2real` command line: one module per command family; `main` builds the parser."""
