"""The HTTP face of the engine: AG-UI over SSE in front of the thread workflows."""
