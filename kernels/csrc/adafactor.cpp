// optbench's fused CPU Adafactor step, the binding: torch tensors in, checked, made contiguous (a
// column-major weight as its transpose, in place; other non-contiguous tensors as copies written back),
// then every tensor's step in one call into the arithmetic (adafactor_math.cpp, which describes it).
#include "adafactor_math.h"

#include <ATen/core/Tensor.h>  // (not ATen/ATen.h: a third of the cold build time)
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

namespace {

using optbench_adafactor::Dtype;
using optbench_adafactor::Scalars;
using optbench_adafactor::TensorStep;

Dtype dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return Dtype::Double;
    case at::kFloat: return Dtype::Float;
    case at::kBFloat16: return Dtype::BFloat16;
    case at::kHalf: return Dtype::Half;
    default: TORCH_CHECK(false, "optbench's Adafactor kernel: unsupported dtype ", t);
  }
}

// step += 1 (float32, as torch) and its value.
double advance(at::Tensor& step) {
  if (step.device().is_cpu() && step.scalar_type() == at::kFloat && step.numel() == 1) {
    float* s = step.data_ptr<float>();
    *s += 1.0f;
    step.unsafeGetTensorImpl()->bump_version();
    return *s;
  }
  step.add_(1);
  return step.item<double>();
}

// A contiguous tensor to compute in (t itself, a contiguous view of it, or a copy written back afterwards).
struct Work {
  at::Tensor& t;
  at::Tensor c;
  bool copy;
  Work(at::Tensor& t_, at::Tensor c_) : t(t_), c(std::move(c_)), copy(!c.is_alias_of(t)) {}
  void done() {
    if (copy) t.copy_(c);
    else t.unsafeGetTensorImpl()->bump_version();
  }
};

void step(std::vector<at::Tensor> params, std::vector<at::Tensor> grads, std::vector<at::Tensor> steps,
          std::vector<std::optional<at::Tensor>> row_vars, std::vector<std::optional<at::Tensor>> col_vars,
          std::vector<std::optional<at::Tensor>> variances, double lr, double beta2_decay, std::optional<double> eps1,
          double eps2, double d, double weight_decay, bool maximize) {
  const size_t count = params.size();
  TORCH_CHECK(grads.size() == count && steps.size() == count && row_vars.size() == count &&
              col_vars.size() == count && variances.size() == count, "optbench Adafactor: list lengths differ");
  for (size_t i = 0; i < count; ++i) {  // everything checked before anything changes
    const at::Tensor &param = params[i], &grad = grads[i];
    TORCH_CHECK(param.device().is_cpu() && grad.device().is_cpu(),
                "optbench's Adafactor kernel runs on CPU tensors only");
    TORCH_CHECK(grad.scalar_type() == param.scalar_type() && grad.sizes() == param.sizes(),
                "optbench Adafactor: a gradient's dtype or shape differs from its parameter's");
    const auto fits = [&](const std::optional<at::Tensor>& t, int64_t numel) {
      return t && t->scalar_type() == param.scalar_type() && t->numel() == numel && t->device().is_cpu();
    };
    if (grad.dim() >= 2) {
      int64_t B = 1;
      for (int64_t k = 0; k + 2 < grad.dim(); ++k) B *= grad.size(k);
      const int64_t n = grad.size(-2), m = grad.size(-1);
      TORCH_CHECK(fits(row_vars[i], B * n) && fits(col_vars[i], B * m),
                  "optbench Adafactor: row_var/col_var missing or not fitting the parameter");
    } else {
      TORCH_CHECK(fits(variances[i], param.numel()),
                  "optbench Adafactor: variance missing or not fitting the parameter");
    }
  }
  std::vector<TensorStep> jobs;
  std::vector<std::unique_ptr<Work>> works;  // written back (or their versions bumped) after the step
  std::vector<at::Tensor> contiguous_grads;
  auto work = [&](at::Tensor& t, at::Tensor c) -> at::Tensor& {
    return works.emplace_back(std::make_unique<Work>(t, std::move(c)))->c;
  };
  for (size_t i = 0; i < count; ++i) {
    const double t = advance(steps[i]);
    if (params[i].numel() == 0) continue;  // state and step only (torch divides by numel here: F04)
    const Dtype type = dtype_of(params[i].scalar_type());
    const Scalars sc{lr, std::pow(t, beta2_decay), std::min(lr, 1.0 / std::pow(t, 0.5)),
                     eps1 ? *eps1 : optbench_adafactor::dtype_eps(type), eps2, d, weight_decay, maximize};
    at::Tensor& param = params[i];
    if (param.dim() >= 2) {  // a column-major parameter (slices) is stepped in place, as its transpose
      const bool transposed = !param.is_contiguous() && param.transpose(-2, -1).is_contiguous();
      const at::Tensor& p = work(param, transposed ? param.transpose(-2, -1) : param.contiguous());
      const at::Tensor& g = contiguous_grads.emplace_back(
          transposed ? grads[i].transpose(-2, -1).contiguous() : grads[i].contiguous());
      const int64_t n = param.size(-2), m = param.size(-1), B = param.numel() / (n * m);
      at::Tensor &r = work(*row_vars[i], row_vars[i]->contiguous()), &c = work(*col_vars[i], col_vars[i]->contiguous());
      jobs.push_back({type, p.data_ptr(), g.const_data_ptr(), r.data_ptr(), c.data_ptr(), nullptr, B, n, m,
                      param.numel(), true, transposed, sc});
    } else {
      const at::Tensor& p = work(param, param.contiguous());
      const at::Tensor& g = contiguous_grads.emplace_back(grads[i].contiguous());
      at::Tensor& v = work(*variances[i], variances[i]->contiguous());
      jobs.push_back({type, p.data_ptr(), g.const_data_ptr(), nullptr, nullptr, v.data_ptr(), 1, 0, 0, g.numel(),
                      false, false, sc});
    }
  }
  optbench_adafactor::run_steps(jobs);
  for (auto& w : works) w->done();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("step", &step, "One Adafactor step over a param group's tensors (those with a gradient)",
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
