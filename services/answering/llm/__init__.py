"""Answer backends: one interface, registered by name."""
