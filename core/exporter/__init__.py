"""One export from start to end, behind :mod:`oxport.api`: the options checked once
(:mod:`~oxport.exporter.options`), the phases in order (:mod:`~oxport.exporter.pipeline`),
what it produced (:mod:`~oxport.exporter.result`, rendered as text by
:mod:`~oxport.exporter.pretty`), what holds while it runs (:mod:`~oxport.exporter.state`,
:mod:`~oxport.exporter.process_hooks`) and its progress (:mod:`~oxport.exporter.progress`)."""
