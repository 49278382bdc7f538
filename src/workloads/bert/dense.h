#pragma once
// Matrix products of BERT's dense layers on oneDNN's sgemm where it is there.
//
// LibTorch sends a float32 CPU matrix product to its BLAS. Debian's is OpenBLAS 0.3.21, which runs its Haswell
// (AVX2) kernel even on AVX-512 CPUs it does not know (Zen 4 among them); oneDNN, which LibTorch links already,
// picks its kernel by the CPU's ISA at run time. On this project's VM (Zen 4, AVX-512) oneDNN's sgemm took half
// of OpenBLAS's time on every shape of the BERT mini step. Float32 CPU tensors take that path when the build
// found oneDNN's header (TRAINBENCH_WITH_DNNL; Debian's libdnnl-dev); anything else gets LibTorch's own ops.
#include <torch/torch.h>

namespace trainbench::bert {

// Whether float32 CPU products in this file go to oneDNN: when the build has it, unless the environment sets
// TRAINBENCH_ONEDNN_GEMM=0 (for comparing the two on a CPU whose BLAS may know it better). Anything but 0 or 1
// there is an error naming the variable.
bool dense_uses_onednn();

// out = alpha · op(a) · op(b) + beta · out for 2-D float32 tensors, op transposing when asked; `out` must be a
// contiguous [rows of op(a), columns of op(b)] tensor. No autograd: for forward and backward code.
void gemm_into(torch::Tensor& out, const torch::Tensor& a, bool transpose_a, const torch::Tensor& b, bool transpose_b,
               double alpha = 1.0, double beta = 0.0);

// rows · weightᵀ + bias for 2-D rows [n, in], weight [out, in] and bias [out], into a new contiguous [n, out]
// tensor. No autograd, like gemm_into.
torch::Tensor affine(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias);

// input · weightᵀ + bias over input's last dimension (torch::nn::functional::linear), differentiable in all
// three. weight: [out, in]; bias: [out].
torch::Tensor dense(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace trainbench::bert
