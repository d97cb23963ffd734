"""What runs on the caller's thread in a traced process: the tracer and its spans (`_tracer`), the
context that nests them across threads, tasks and processes (`_context`), generators that keep their
context (`_streams`), `@mastrace.instrument` (`_instrument`), the GenAI conventions (`_genai`,
`_messages`), the exit hint (`_hints`), the settings read before `configure()` (`_params`), JSON-safe
values (`_snapshot`), and the process state (`_state`, which imports nothing of mastrace).

Nothing here is public: `mastrace` re-exports what users call. See docs/architecture.md.
"""
