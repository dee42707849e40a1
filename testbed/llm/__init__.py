"""A real text-generation engine for the testbed: llama.cpp's server, built from the registry's sources."""
