"""npuwatch's test suite, one directory per tier (docs/development.md)."""
