"""Plugins for other libraries: rdflib parsers and serializers (entry points in pyproject)."""
