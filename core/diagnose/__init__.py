"""Diagnosis: verification against eager PyTorch (:mod:`~oxport.diagnose.verification`),
bisecting a mismatch (:mod:`~oxport.diagnose.mismatch`) and the export report
(:mod:`~oxport.diagnose.report`)."""
