"""A candidate spec key of the plugin's own (entry point optbench.adapters): ``example_version``, a version range
the installed optbench-plugin-example must be in for the spec to apply (a spec written for one release of a
library refuses another in one line, instead of adapting it wrongly)."""

from importlib import metadata

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from optbench import CandidateSpecError, adapter_key


@adapter_key("example_version")
def parse(value, source: str) -> str:
    try:
        wanted = SpecifierSet(str(value))
    except InvalidSpecifier:
        raise CandidateSpecError(f"{source}: example_version: {value!r} is not a version range") from None
    installed = metadata.version("optbench-plugin-example")
    if installed not in wanted:
        raise CandidateSpecError(f"{source}: example_version: written for optbench-plugin-example {wanted}, "
                                 f"{installed} is installed")
    return str(wanted)
