// optbench's fused CPU Adafactor step, the binding: torch tensors in, checked, made contiguous (a
// column-major weight as its transpose, in place; other non-contiguous tensors as copies written back),
// then every tensor's step in one call into the arithmetic (adafactor_math.cpp, which describes it).
// Registered as a torch operator (torch.ops.<extension name>.step) through torch's stable ABI
// (torch/csrc/stable): its headers parse in 1 s where torch's pybind11 binding headers took 10 s, the
// cold build's longest compile on the 2-core CI machine. The caller bumps the tensors' version counters
// (kernels/adafactor.py): the stable ABI has no call for it.
#include "adafactor_math.h"

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <optional>
#include <vector>

namespace {

using optbench_adafactor::Dtype;
using optbench_adafactor::Scalars;
using optbench_adafactor::TensorStep;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptionalTensors = std::vector<std::optional<Tensor>>;

Dtype dtype_of(ScalarType t) {
  switch (t) {
    case ScalarType::Double: return Dtype::Double;
    case ScalarType::Float: return Dtype::Float;
    case ScalarType::BFloat16: return Dtype::BFloat16;
    case ScalarType::Half: return Dtype::Half;
    default: STD_TORCH_CHECK(false, "optbench's Adafactor kernel: unsupported dtype (ScalarType ",
                             static_cast<int>(t), ")");
  }
  return Dtype::Float;
}

// What the checks and the step read of a tensor, each asked of torch once (a stable-ABI query is a call
// into libtorch: asked again and again they cost microseconds per tensor, which many small tensors feel).
struct Meta {
  ScalarType type;
  bool cpu;
  torch::headeronly::IntHeaderOnlyArrayRef sizes;
  int64_t dim, numel;
  explicit Meta(const Tensor& t) : type(t.scalar_type()), cpu(t.is_cpu()), sizes(t.sizes()), dim(sizes.size()) {
    numel = 1;
    for (const int64_t s : sizes) numel *= s;
  }
  bool same_shape(const Meta& o) const { return sizes.equals(o.sizes); }
  bool fits(const Meta& param, int64_t count) const { return cpu && type == param.type && numel == count; }
};

// A step as torch keeps it: a CPU float32 (float64 under a float64 default dtype) scalar tensor.
bool step_fits(const Meta& step) {
  return step.cpu && step.numel == 1 && (step.type == ScalarType::Float || step.type == ScalarType::Double);
}

// step += 1 in the step's own dtype (step_fits) and its value.
double advance(const Tensor& step, ScalarType type) {
  if (type == ScalarType::Float) {
    float* s = static_cast<float*>(step.data_ptr());
    *s += 1.0f;
    return *s;
  }
  double* s = static_cast<double*>(step.data_ptr());
  *s += 1.0;
  return *s;
}

// A tensor to compute in: t itself where contiguous, else a contiguous view of it (`view`: a column-major
// weight's transpose) or a copy, written back after the step.
struct Contiguous {
  std::vector<std::pair<Tensor, Tensor>> copies;  // (the caller's tensor, its copy)
  void* of(const Tensor& t, const Tensor* view = nullptr) {
    if (view != nullptr) return view->data_ptr();
    if (t.is_contiguous()) return t.data_ptr();
    return copies.emplace_back(t, torch::stable::contiguous(t)).second.data_ptr();
  }
  void write_back() {
    for (auto& [t, c] : copies) torch::stable::copy_(t, c);
  }
};

void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& steps,
          const OptionalTensors& row_vars, const OptionalTensors& col_vars, const OptionalTensors& variances,
          double lr, double beta2_decay, std::optional<double> eps1, double eps2, double d, double weight_decay,
          bool maximize) {
  const size_t count = params.size();
  STD_TORCH_CHECK(grads.size() == count && steps.size() == count && row_vars.size() == count &&
                      col_vars.size() == count && variances.size() == count,
                  "optbench Adafactor: list lengths differ");
  std::vector<Meta> metas, step_metas;
  metas.reserve(count);
  step_metas.reserve(count);
  for (size_t i = 0; i < count; ++i) {  // everything checked before anything changes
    const Meta& param = metas.emplace_back(params[i]);
    const Meta grad(grads[i]);
    STD_TORCH_CHECK(param.cpu && grad.cpu, "optbench's Adafactor kernel runs on CPU tensors only");
    STD_TORCH_CHECK(grad.type == param.type && grad.same_shape(param),
                    "optbench Adafactor: a gradient's dtype or shape differs from its parameter's");
    dtype_of(param.type);
    const auto fits = [&](const std::optional<Tensor>& t, int64_t numel) { return t && Meta(*t).fits(param, numel); };
    if (param.dim >= 2) {
      int64_t B = 1;
      for (int64_t k = 0; k + 2 < param.dim; ++k) B *= param.sizes[k];
      const int64_t n = param.sizes[param.dim - 2], m = param.sizes[param.dim - 1];
      STD_TORCH_CHECK(fits(row_vars[i], B * n) && fits(col_vars[i], B * m),
                      "optbench Adafactor: row_var/col_var missing or not fitting the parameter");
    } else {
      STD_TORCH_CHECK(fits(variances[i], param.numel),
                      "optbench Adafactor: variance missing or not fitting the parameter");
    }
    STD_TORCH_CHECK(step_fits(step_metas.emplace_back(steps[i])),
                    "optbench Adafactor: a step must be a CPU float32 or float64 scalar tensor");
  }
  std::vector<TensorStep> jobs;
  jobs.reserve(count);
  Contiguous memory;
  std::vector<Tensor> held;  // contiguous gradients and transposed views, alive until the step is done
  for (size_t i = 0; i < count; ++i) {
    const double t = advance(steps[i], step_metas[i].type);
    const Meta& meta = metas[i];
    if (meta.numel == 0) continue;  // state and step only (torch divides by numel here: F04)
    const Dtype type = dtype_of(meta.type);
    const Scalars sc{lr, std::pow(t, beta2_decay), std::min(lr, 1.0 / std::pow(t, 0.5)),
                     eps1 ? *eps1 : optbench_adafactor::dtype_eps(type), eps2, d, weight_decay, maximize};
    const Tensor &param = params[i], &grad = grads[i];
    const void* g = nullptr;
    if (meta.dim >= 2) {  // a column-major parameter (slices) is stepped in place, as its transpose
      const int64_t n = meta.sizes[meta.dim - 2], m = meta.sizes[meta.dim - 1], B = meta.numel / (n * m);
      const Tensor* view = nullptr;
      bool transposed = false;
      if (!param.is_contiguous()) {
        Tensor& flipped = held.emplace_back(torch::stable::transpose(param, meta.dim - 2, meta.dim - 1));
        transposed = flipped.is_contiguous();
        view = transposed ? &flipped : nullptr;
      }
      void* p = memory.of(param, view);
      if (transposed) {
        g = held.emplace_back(torch::stable::contiguous(torch::stable::transpose(grad, meta.dim - 2, meta.dim - 1)))
                .const_data_ptr();
      } else {
        g = grad.is_contiguous() ? grad.const_data_ptr()
                                 : held.emplace_back(torch::stable::contiguous(grad)).const_data_ptr();
      }
      jobs.push_back({type, p, g, memory.of(*row_vars[i]), memory.of(*col_vars[i]), nullptr, B, n, m, meta.numel,
                      true, transposed, sc});
    } else {
      void* p = memory.of(param);
      g = grad.is_contiguous() ? grad.const_data_ptr() : held.emplace_back(torch::stable::contiguous(grad)).const_data_ptr();
      jobs.push_back({type, p, g, nullptr, nullptr, memory.of(*variances[i]), 1, 0, 0, meta.numel, false, false, sc});
    }
  }
  optbench_adafactor::run_steps(jobs);
  memory.write_back();
}

}  // namespace

// One Adafactor step over a param group's tensors (those with a gradient). The registration macros paste
// their namespace argument, so the extension's name is expanded one macro level up.
#define OPTBENCH_LIBRARY(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define OPTBENCH_LIBRARY_IMPL(ns, k, m) STABLE_TORCH_LIBRARY_IMPL(ns, k, m)
OPTBENCH_LIBRARY(TORCH_EXTENSION_NAME, m) {
  m.def("step(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] steps, Tensor?[] row_vars, Tensor?[] col_vars, "
        "Tensor?[] variances, float lr, float beta2_decay, float? eps1, float eps2, float d, float weight_decay, "
        "bool maximize) -> ()");
}
OPTBENCH_LIBRARY_IMPL(TORCH_EXTENSION_NAME, CPU, m) { m.impl("step", TORCH_BOX(&step)); }
