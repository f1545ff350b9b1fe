"""Answer backends' contract (one interface, registered by name) and the language-model backends: Claude, OpenAI-compatible."""
