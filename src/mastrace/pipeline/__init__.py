"""The export pipeline: one span processor handing finished spans to a worker per destination
(`_pipeline`), the export-thread transform that scrubs, coerces and caps them (`_transform`), and the
configuration snapshots spans carry (`_snapshots_on_spans`).

Nothing here is public: `mastrace.configure()` builds it. See docs/architecture.md.
"""
