"""A check module that fails on import, as a plugin with a bug or a missing dependency would."""

raise ImportError("this plugin needs a package that is not installed")
