/// @file
/// tg::autograd::functional — torch.autograd.functional: vector-Jacobian and Jacobian-vector
/// products, Hessian-vector products, whole Jacobians and Hessians of a function of tensors.
///
/// Each takes the function `f` (tensors in, one tensor out), the point `inputs` and, for the
/// products, the vector `v`; each evaluates f once at fresh leaves holding the inputs' values and
/// differentiates it with autograd::grad. Results are as PyTorch's:
///
/// | call | returns | shapes |
/// |---|---|---|
/// | `vjp(f, inputs, v)` | {f(inputs), vᵀ·J} | v: f's output; products: one per input |
/// | `jvp(f, inputs, v)` | {f(inputs), J·v} | v: one per input; product: f's output |
/// | `vhp(f, inputs, v)` | {f(inputs), vᵀ·H} | f returns one element; v and products: one per input |
/// | `hvp(f, inputs, v)` | {f(inputs), H·v} | as vhp |
/// | `jacobian(f, inputs)` | J | [i]: output.shape + inputs[i].shape |
/// | `hessian(f, inputs)` | H | [i][j]: inputs[i].shape + inputs[j].shape |
///
/// @code
///   namespace F = tg::autograd::functional;
///   auto loss = [&](const std::vector<tg::Tensor>& w) { return tg::nn::mse_loss(model_with(w), y); };
///   auto [value, hv] = F::hvp(loss, weights, directions);   // H·v, one tensor per weight
///   std::vector<std::vector<tg::Tensor>> h = F::hessian(loss, weights);
/// @endcode
///
/// jvp uses the double-vjp trick (J·v is the gradient, with respect to u, of vᵀ-contracted
/// (uᵀ·J)), and hvp the double-backward trick of PyTorch, so both need f's ops to be twice
/// differentiable (hvp thrice); vhp needs twice. With `create_graph` the results are recorded on
/// the tape, so they can be differentiated again, and the inputs that require grad take part in
/// that graph; without it the results are detached. `strict` throws tg::Error where PyTorch's
/// strict mode raises: an input that no output depends on, or (with create_graph) a derivative
/// that does not depend on the inputs; without it such derivatives are zeros.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::autograd::functional {

/// A function of tensors with one tensor out, as torch.autograd.functional takes.
using Function = std::function<Tensor(const std::vector<Tensor>&)>;
/// A function of tensors with several tensors out (jacobian's vector-valued form).
using MultiOutputFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// create_graph and strict, as torch.autograd.functional's keyword arguments (both off by default).
struct FunctionalOptions {
  /// Record the computation of the results, so that they can be differentiated again (they are
  /// detached otherwise).
  bool create_graph = false;
  /// tg::Error instead of zeros when an output does not depend on an input, or, with create_graph,
  /// when a derivative does not depend on the inputs.
  bool strict = false;
};

/// f's output and the products, one per input of f (vjp, vhp, hvp) — what PyTorch returns as a pair.
using OutputAndProducts = std::pair<Tensor, std::vector<Tensor>>;

/// torch.autograd.functional.vjp: {f(inputs), vᵀ·J}, the gradients of sum(f(inputs) · v) with
/// respect to each input. v has f's output shape; it may be left undefined when f returns one
/// element (then v = 1).
OutputAndProducts vjp(const Function& f, const std::vector<Tensor>& inputs, const Tensor& v = {},
                      const FunctionalOptions& options = {});

/// torch.autograd.functional.jvp: {f(inputs), J·v}, the directional derivative of f along v (one
/// tensor per input, of its shape; may be empty when f has one input of one element: v = 1). The
/// product has f's output shape. Computed by the double-vjp trick.
std::pair<Tensor, Tensor> jvp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v = {},
                              const FunctionalOptions& options = {});

/// torch.autograd.functional.vhp: {f(inputs), vᵀ·H} for f returning one element; v has one tensor
/// per input (may be empty when f has one input of one element).
OutputAndProducts vhp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v = {},
                      const FunctionalOptions& options = {});

/// torch.autograd.functional.hvp: {f(inputs), H·v} for f returning one element, by PyTorch's
/// double-backward trick (equal to vhp when f is twice continuously differentiable).
OutputAndProducts hvp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v = {},
                      const FunctionalOptions& options = {});

/// torch.autograd.functional.jacobian (reverse mode): element i is d f / d inputs[i], of shape
/// f's output shape followed by inputs[i]'s shape; one backward per output element.
std::vector<Tensor> jacobian(const Function& f, const std::vector<Tensor>& inputs, const FunctionalOptions& options = {});

/// jacobian of a function with several outputs: element [k][i] is d outputs[k] / d inputs[i], of
/// shape outputs[k].shape + inputs[i].shape.
std::vector<std::vector<Tensor>> jacobian(const MultiOutputFunction& f, const std::vector<Tensor>& inputs,
                                          const FunctionalOptions& options = {});

/// torch.autograd.functional.hessian of f returning one element: element [i][j] is
/// d² f / d inputs[i] d inputs[j], of shape inputs[i].shape + inputs[j].shape.
std::vector<std::vector<Tensor>> hessian(const Function& f, const std::vector<Tensor>& inputs,
                                         const FunctionalOptions& options = {});

}  // namespace tg::autograd::functional
