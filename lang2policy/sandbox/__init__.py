"""Running LLM-written policy code safely: child process, intents, privilege policy."""
