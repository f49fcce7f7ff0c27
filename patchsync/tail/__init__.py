"""The tail daemon: keeps a target in step with growing logs (``patchsync tail``)."""
