"""A plugin package whose check module is broken."""
