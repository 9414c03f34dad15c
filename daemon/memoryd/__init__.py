"""memoryd: an on-device memory daemon for personal LLM agents."""

__version__ = "0.1.0"
