"""optbench: verify and time PyTorch optimizers against independent float64 references."""

from .state.by_name import load_state_dict_by_name, name_aware, with_param_names
from .state.formats import as_torch, from_flat, from_name_keyed, optimizer_from_dict, to_flat, to_name_keyed
from .watch import Divergence, watch

__version__ = "0.1.0"
__all__ = ["load_state_dict_by_name", "name_aware", "with_param_names", "as_torch", "from_flat", "from_name_keyed",
           "optimizer_from_dict", "to_flat", "to_name_keyed", "watch", "Divergence", "__version__"]
