import os

# Our own suite never tolerates a broken plugin.
os.environ.setdefault("OXPORT_STRICT_PLUGINS", "1")
