"""oxport's transformers plugins: the cache classes as model I/O types, tasks that export a
checkpoint folder, and the architectures' quirks. Nothing here imports transformers until
an export needs it."""
