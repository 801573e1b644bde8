"""The TorchScript front end: tracing and scripting (:mod:`~oxport.frontends.torchscript.trace`),
TorchScript passes for control flow (:mod:`~oxport.frontends.torchscript.script_passes`), and
the sizes a trace baked into numbers (:mod:`~oxport.frontends.torchscript.baked_sizes`)."""
