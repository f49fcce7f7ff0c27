"""Apply targets, one module per backend."""
