"""optbench: verify and time PyTorch optimizers against independent float64 references."""

from .state_by_name import load_state_dict_by_name, name_aware

__version__ = "0.1.0"
__all__ = ["load_state_dict_by_name", "name_aware", "__version__"]
