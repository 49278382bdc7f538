#include "workloads/bert/dense.h"

#ifdef TRAINBENCH_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace trainbench::bert {

namespace {

bool onednn_can_take(const torch::Tensor& tensor) {
  return dense_uses_onednn() && tensor.is_cpu() && tensor.scalar_type() == torch::kFloat;
}

// input · weightᵀ + bias with both products of the backward on gemm_into.
class DenseFunction : public torch::autograd::Function<DenseFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = weight.size(1), out = weight.size(0);
    const torch::Tensor rows = input.reshape({-1, in}).contiguous();
    const torch::Tensor weight_contiguous = weight.contiguous();
    const torch::Tensor result = affine(rows, weight_contiguous, bias);
    // Kept as saved data, not save_for_backward: `rows` may be a copy made here rather than an input.
    context->saved_data["rows"] = rows;
    context->saved_data["weight"] = weight_contiguous;
    std::vector<int64_t> shape = input.sizes().vec();
    shape.back() = out;
    return result.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor rows = context->saved_data["rows"].toTensor();
    const torch::Tensor weight = context->saved_data["weight"].toTensor();
    const torch::Tensor grad = grad_outputs[0].reshape({-1, weight.size(0)}).contiguous();
    torch::Tensor input_grad, weight_grad, bias_grad;
    if (context->needs_input_grad(0)) {
      input_grad = torch::empty_like(rows);
      gemm_into(input_grad, grad, false, weight, false);
      std::vector<int64_t> shape = grad_outputs[0].sizes().vec();
      shape.back() = weight.size(1);
      input_grad = input_grad.view(shape);
    }
    if (context->needs_input_grad(1)) {
      weight_grad = torch::empty_like(weight);
      gemm_into(weight_grad, grad, true, rows, false);
    }
    if (context->needs_input_grad(2)) bias_grad = grad.sum(0);
    return {input_grad, weight_grad, bias_grad};
  }
};

}  // namespace

bool dense_uses_onednn() {
#ifdef TRAINBENCH_WITH_DNNL
  static const bool enabled = [] {
    const char* setting = std::getenv("TRAINBENCH_ONEDNN_GEMM");
    if (setting == nullptr || std::string(setting) == "1") return true;
    if (std::string(setting) == "0") return false;
    fail("TRAINBENCH_ONEDNN_GEMM", std::string("must be 0 (LibTorch's matmul) or 1 (oneDNN's sgemm), got '") + setting + "'");
  }();
  return enabled;
#else
  return false;
#endif
}

void gemm_into(torch::Tensor& out, const torch::Tensor& a, bool transpose_a, const torch::Tensor& b, bool transpose_b,
               double alpha, double beta) {
  const torch::Tensor op_a = transpose_a ? a.t() : a, op_b = transpose_b ? b.t() : b;
  if (a.dim() != 2 || b.dim() != 2 || op_a.size(1) != op_b.size(0) || !out.is_contiguous() ||
      out.size(0) != op_a.size(0) || out.size(1) != op_b.size(1))
    fail("bert gemm", "shapes do not multiply: [" + std::to_string(op_a.size(0)) + ", " + std::to_string(op_a.size(1)) +
                          "] x [" + std::to_string(op_b.size(0)) + ", " + std::to_string(op_b.size(1)) + "] into a " +
                          (out.is_contiguous() ? "" : "non-contiguous ") + "[" + std::to_string(out.size(0)) + ", " +
                          std::to_string(out.size(1)) + "] result");
#ifdef TRAINBENCH_WITH_DNNL
  if (onednn_can_take(out) && onednn_can_take(a) && onednn_can_take(b) && a.is_contiguous() && b.is_contiguous()) {
    // Row-major: a transposed operand is the untransposed contiguous tensor read with 'T'.
    const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', out.size(0), out.size(1),
                                            op_a.size(1), static_cast<float>(alpha), a.data_ptr<float>(), a.size(1),
                                            b.data_ptr<float>(), b.size(1), static_cast<float>(beta),
                                            out.data_ptr<float>(), out.size(1));
    if (status != dnnl_success) fail("bert gemm", "oneDNN's sgemm failed with status " + std::to_string(status));
    return;
  }
#endif
  out.addmm_(op_a, op_b, beta, alpha);
}

torch::Tensor affine(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  torch::Tensor result = bias.expand({rows.size(0), weight.size(0)}).contiguous();
  gemm_into(result, rows, false, weight, true, 1.0, 1.0);
  return result;
}

torch::Tensor dense(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!onednn_can_take(input) || !onednn_can_take(weight) || !onednn_can_take(bias))
    return torch::nn::functional::linear(input, weight, bias);
  return DenseFunction::apply(input, weight, bias);
}

}  // namespace trainbench::bert
