"""The parameter names a state_dict's param groups carry (``param_names``), and the error when they cannot
be matched: the ground every by-name state operation stands on."""

from __future__ import annotations


class StateDictNameError(KeyError):
    """A saved or current parameter name has no counterpart, or the names cannot be matched."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def group_names(groups: list[dict], where: str) -> list[list[str]]:
    """Each group's ``param_names``; a group without them, or a name twice, raises StateDictNameError."""
    names = []
    for i, group in enumerate(groups):
        if "param_names" not in group:
            raise StateDictNameError(
                f"{where} param group {i} has no 'param_names': build the optimizer from "
                "model.named_parameters() (torch >= 2.5) so its state can be matched by name"
            )
        names.append(list(group["param_names"]))
    flat = [n for group in names for n in group]
    duplicates = sorted({n for n in flat if flat.count(n) > 1})
    if duplicates:
        raise StateDictNameError(f"{where} parameter names are not unique: {', '.join(duplicates)}")
    return names
