"""F32: unit_scaling.optim.Adam cannot take named parameters, so torch's param_names are lost with it.

torch >= 2.5 optimizers take model.named_parameters() ((name, tensor) pairs) and record each group's
param_names, which a state_dict then carries (loading by name, PyTorch #1489). unit_scaling.optim.Adam
rewrites the params argument before torch sees it (scaled_parameters: entry.copy(), param.mup_type,
param.shape) and treats a pair as a parameter group or a parameter: AttributeError. Exit 1 while it raises.
"""
import torch
import unit_scaling as uu
from unit_scaling.optim import Adam

model = torch.nn.Module()
model.proj = uu.Linear(8, 4, bias=True)  # weight: mup_type weight, bias: mup_type bias
present = False
for what, params in (("model.named_parameters()", lambda: model.named_parameters()),
                     ("[{'params': model.named_parameters()}]", lambda: [{"params": list(model.named_parameters())}])):
    print(f"torch.optim.Adam({what}): param_names",
          torch.optim.Adam(params(), lr=1e-3).state_dict()["param_groups"][0]["param_names"])
    try:
        Adam(params(), lr=1e-3)
        print(f"unit_scaling.optim.Adam({what}): accepted")
    except AttributeError as exc:
        present = True
        print(f"unit_scaling.optim.Adam({what}): AttributeError: {exc}")
opt = Adam(model.parameters(), lr=1e-3)
print("unit_scaling.optim.Adam(model.parameters()) state_dict param_groups carry param_names:",
      any("param_names" in g for g in opt.state_dict()["param_groups"]))
raise SystemExit(1 if present else 0)
