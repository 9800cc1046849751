"""Conformance tier: the parsers over the real captured corpus (../shared/corpus or $NPUWATCH_CORPUS)."""
