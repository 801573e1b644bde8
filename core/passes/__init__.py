"""Graph passes over oxport's IR, run after the walk: dead-code removal and constant folding
(:mod:`~oxport.passes.folding`), the clean-ups that run with folding
(:mod:`~oxport.passes.optimize`), casts for dtypes a kernel lacks
(:mod:`~oxport.passes.dtype_legalization`), module calls as local functions
(:mod:`~oxport.passes.functions`), and dtype/shape inference (:mod:`~oxport.passes.infer`)."""
