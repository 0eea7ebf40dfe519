// The interface between the binding (adafactor.cpp: tensors, checks, copies) and the arithmetic
// (adafactor_math.cpp: raw memory), compiled apart so that the two build side by side.
#pragma once

#include <cstdint>
#include <vector>

namespace optbench_adafactor {

struct Scalars {
  double lr, w, rho, eps1, eps2, d, wd;
  bool maximize;
};

enum class Dtype { Double, Float, BFloat16, Half };

// One parameter's step over contiguous memory: factored (B slices of n x m, or of m x n where
// `transposed`: a column-major weight stepped in place), with row_var [B * n] and col_var [B * m];
// else `numel` elements with their variance.
struct TensorStep {
  Dtype dtype;
  void* p;
  const void* g;
  void *row_var, *col_var, *variance;
  int64_t B, n, m, numel;
  bool factored, transposed;
  Scalars sc;
};

double dtype_eps(Dtype t);

// Every tensor's step, in order, in one parallel region (torch's intra-op threads).
void run_steps(const std::vector<TensorStep>& steps);

}  // namespace optbench_adafactor
