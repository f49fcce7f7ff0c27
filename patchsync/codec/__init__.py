"""The pure codec: bytes in, events out, and back. Nothing here does I/O."""
