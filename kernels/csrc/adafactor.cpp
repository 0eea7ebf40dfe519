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
#include <memory>
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

bool same_sizes(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (a.size(k) != b.size(k)) return false;
  }
  return true;
}

// A step as torch keeps it: a CPU float32 (float64 under a float64 default dtype) scalar tensor.
bool step_fits(const Tensor& step) {
  return step.is_cpu() && step.numel() == 1 &&
         (step.scalar_type() == ScalarType::Float || step.scalar_type() == ScalarType::Double);
}

// step += 1 in the step's own dtype (step_fits) and its value.
double advance(const Tensor& step) {
  if (step.scalar_type() == ScalarType::Float) {
    float* s = static_cast<float*>(step.data_ptr());
    *s += 1.0f;
    return *s;
  }
  double* s = static_cast<double*>(step.data_ptr());
  *s += 1.0;
  return *s;
}

Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }

// A contiguous tensor to compute in (t itself, a contiguous view of it, or a copy written back afterwards).
struct Work {
  Tensor t;  // (a handle: the caller's tensor itself)
  Tensor c;
  bool copy;
  Work(Tensor t_, Tensor c_) : t(std::move(t_)), c(std::move(c_)), copy(c.data_ptr() != t.data_ptr()) {}
  void done() {
    if (copy) torch::stable::copy_(t, c);
  }
};

void step(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> steps, OptionalTensors row_vars,
          OptionalTensors col_vars, OptionalTensors variances, double lr, double beta2_decay,
          std::optional<double> eps1, double eps2, double d, double weight_decay, bool maximize) {
  const size_t count = params.size();
  STD_TORCH_CHECK(grads.size() == count && steps.size() == count && row_vars.size() == count &&
                      col_vars.size() == count && variances.size() == count,
                  "optbench Adafactor: list lengths differ");
  for (size_t i = 0; i < count; ++i) {  // everything checked before anything changes
    const Tensor &param = params[i], &grad = grads[i];
    STD_TORCH_CHECK(param.is_cpu() && grad.is_cpu(), "optbench's Adafactor kernel runs on CPU tensors only");
    STD_TORCH_CHECK(grad.scalar_type() == param.scalar_type() && same_sizes(grad, param),
                    "optbench Adafactor: a gradient's dtype or shape differs from its parameter's");
    dtype_of(param.scalar_type());
    const auto fits = [&](const std::optional<Tensor>& t, int64_t numel) {
      return t && t->scalar_type() == param.scalar_type() && t->numel() == numel && t->is_cpu();
    };
    if (grad.dim() >= 2) {
      int64_t B = 1;
      for (int64_t k = 0; k + 2 < grad.dim(); ++k) B *= grad.size(k);
      const int64_t n = grad.size(grad.dim() - 2), m = grad.size(grad.dim() - 1);
      STD_TORCH_CHECK(fits(row_vars[i], B * n) && fits(col_vars[i], B * m),
                      "optbench Adafactor: row_var/col_var missing or not fitting the parameter");
    } else {
      STD_TORCH_CHECK(fits(variances[i], param.numel()),
                      "optbench Adafactor: variance missing or not fitting the parameter");
    }
    STD_TORCH_CHECK(step_fits(steps[i]), "optbench Adafactor: a step must be a CPU float32 or float64 scalar tensor");
  }
  std::vector<TensorStep> jobs;
  std::vector<std::unique_ptr<Work>> works;  // written back after the step
  std::vector<Tensor> contiguous_grads;
  auto work = [&](const Tensor& t, Tensor c) -> Tensor& {
    return works.emplace_back(std::make_unique<Work>(t, std::move(c)))->c;
  };
  for (size_t i = 0; i < count; ++i) {
    const double t = advance(steps[i]);
    if (params[i].numel() == 0) continue;  // state and step only (torch divides by numel here: F04)
    const Dtype type = dtype_of(params[i].scalar_type());
    const Scalars sc{lr, std::pow(t, beta2_decay), std::min(lr, 1.0 / std::pow(t, 0.5)),
                     eps1 ? *eps1 : optbench_adafactor::dtype_eps(type), eps2, d, weight_decay, maximize};
    const Tensor& param = params[i];
    const int64_t dims = param.dim();
    if (dims >= 2) {  // a column-major parameter (slices) is stepped in place, as its transpose
      const bool transposed =
          !param.is_contiguous() && torch::stable::transpose(param, dims - 2, dims - 1).is_contiguous();
      const Tensor& p = work(param, transposed ? torch::stable::transpose(param, dims - 2, dims - 1) : as_contiguous(param));
      const Tensor& g = contiguous_grads.emplace_back(
          transposed ? torch::stable::contiguous(torch::stable::transpose(grads[i], dims - 2, dims - 1))
                     : as_contiguous(grads[i]));
      const int64_t n = param.size(dims - 2), m = param.size(dims - 1), B = param.numel() / (n * m);
      Tensor &r = work(*row_vars[i], as_contiguous(*row_vars[i])), &c = work(*col_vars[i], as_contiguous(*col_vars[i]));
      jobs.push_back({type, p.data_ptr(), g.const_data_ptr(), r.data_ptr(), c.data_ptr(), nullptr, B, n, m,
                      param.numel(), true, transposed, sc});
    } else {
      const Tensor& p = work(param, as_contiguous(param));
      const Tensor& g = contiguous_grads.emplace_back(as_contiguous(grads[i]));
      Tensor& v = work(*variances[i], as_contiguous(*variances[i]));
      jobs.push_back({type, p.data_ptr(), g.const_data_ptr(), nullptr, nullptr, v.data_ptr(), 1, 0, 0, g.numel(),
                      false, false, sc});
    }
  }
  optbench_adafactor::run_steps(jobs);
  for (auto& w : works) w->done();
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
