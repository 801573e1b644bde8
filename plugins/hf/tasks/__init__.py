"""transformers tasks: each module registers a family of tasks (``oxport_register_tasks``)
through its own ``oxport`` entry point; :mod:`.common` holds what they share (reading a
checkpoint folder, copying its companion files, matching architectures for ``auto``)."""
