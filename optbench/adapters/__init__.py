"""A candidate's adapter, written in YAML (a candidate spec, ``spec.py``): one module per key, each registered with
``registry.adapter_key``; library-specific helpers a spec names (a state decoder) live in ``libraries/``."""
