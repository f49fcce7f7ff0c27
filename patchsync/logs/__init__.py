"""Log files: reading, writing and appending patch logs, and RDF files in and out."""
