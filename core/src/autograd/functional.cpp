// torch.autograd.functional on autograd::grad, following torch/autograd/functional.py step by step
// (its helpers _grad_preprocess, _autograd_grad, _fill_in_zeros and _check_requires_grad are the
// helpers below), so that results, zeros and strict-mode errors are PyTorch's.
//
// The products are all reverse mode:
//   vjp:  vᵀJ = ∂(f·v)/∂x                                 one backward
//   jvp:  Jv  = ∂/∂u [ (∂(f·u)/∂x) · v ]                    the double-vjp trick: ∂(f·u)/∂x = Jᵀu is
//                                                            linear in u, and its vjp with v is Jv
//   vhp:  vᵀH = ∂/∂x [ (∂f/∂x) · v ]                        a double backward
//   hvp:  Hv  = ∂/∂w [ ∂/∂x ((∂f/∂x) · w) · v ]              PyTorch's double-backward trick: the inner
//                                                            term is Hᵀw, linear in w, whose vjp is Hv
//   jacobian: one backward per output element (a one-hot grad_output); hessian: the jacobian of
//   the jacobian, the inner one taken with create_graph.
#include "tapegrad/autograd/functional.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd.hpp"
#include "tapegrad/autograd/grad.hpp"

namespace tg::autograd::functional {

namespace {

// Every computation here is recorded first and differentiated after: grad mode must be on
// (PyTorch turns it on inside; tapegrad leaves the caller's NoGradGuard alone).
void require_grad_mode(const char* op) {
  check(is_grad_enabled(), op,
        "grad mode is off on this thread (a NoGradGuard is alive), so f's operations would not be recorded and "
        "there would be nothing to differentiate; call it outside the NoGradGuard");
}

// _grad_preprocess: with create_graph, an input that requires grad is used as it is, so the
// results' graph reaches it; otherwise a fresh leaf sharing its values (requiring grad when
// `need_graph`), so that nothing is recorded into the caller's graph.
std::vector<Tensor> preprocess(const std::vector<Tensor>& tensors, bool create_graph, bool need_graph, const char* op,
                               const char* what) {
  std::vector<Tensor> result;
  result.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check(t.defined(), op, what, " ", i, " is undefined");
    if (create_graph && t.requires_grad()) {
      result.push_back(t);
    } else {
      Tensor leaf = t.detach();
      if (need_graph) {
        check(t.dtype() == kFloat32 || t.dtype() == kFloat64, op, what, " ", i, " (shape ", t.shape(), ") is ",
              t.dtype(), "; only float32 and float64 tensors can be differentiated");
        leaf.requires_grad_();
      }
      result.push_back(leaf);
    }
  }
  return result;
}

// _grad_postprocess: without create_graph the results are detached (and undefined stays undefined).
std::vector<Tensor> postprocess(std::vector<Tensor> tensors, bool create_graph) {
  if (!create_graph)
    for (Tensor& t : tensors)
      if (t.defined()) t = t.detach();
  return tensors;
}
Tensor postprocess(const Tensor& t, bool create_graph) { return create_graph || !t.defined() ? t : t.detach(); }

// f at x; an undefined result is the caller's bug.
Tensor call(const Function& f, const std::vector<Tensor>& x, const char* op) {
  Tensor out = f(x);
  check(out.defined(), op, "the function returned an undefined tensor");
  return out;
}

// _validate_v: one v per reference (f's inputs or outputs), each of its reference's shape and dtype.
void validate_v(const std::vector<Tensor>& v, const std::vector<Tensor>& refs, const char* op, const char* what) {
  check(v.size() == refs.size(), op, "v has invalid length: expected ", refs.size(), " tensors (one per ", what,
        ") but got ", v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    check(v[i].shape() == refs[i].shape(), op, "mismatch in shape for ", what, " ", i, ": expected v[", i,
          "] of shape ", refs[i].shape(), " but got ", v[i].shape());
    check(v[i].dtype() == refs[i].dtype(), op, "mismatch in dtype for ", what, " ", i, ": expected v[", i, "] ",
          refs[i].dtype(), " but got ", v[i].dtype());
  }
}

// _autograd_grad: the gradients of Σ_k outputs[k] · grad_outputs[k] with respect to `inputs`,
// undefined for an input no output reaches. Outputs that are undefined or do not require grad are
// dropped with their grad_outputs (they contribute nothing); an undefined grad_output (or none
// given) stands for ones, which needs a one-element output.
std::vector<Tensor> grad_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& grad_outputs, bool create_graph, const char* op,
                            std::optional<bool> retain_graph = std::nullopt) {
  std::vector<Tensor> kept_outputs, kept_grad_outputs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& out = outputs[k];
    if (!out.defined() || !out.requires_grad()) continue;
    Tensor grad_output = k < grad_outputs.size() ? grad_outputs[k] : Tensor();
    if (!grad_output.defined()) {
      check(out.numel() == 1, op, "v can only be omitted when the tensor it multiplies has one element, got shape ",
            out.shape());
      grad_output = ones_like(out);
    }
    kept_outputs.push_back(out);
    kept_grad_outputs.push_back(grad_output);
  }
  if (kept_outputs.empty()) return std::vector<Tensor>(inputs.size());
  return grad(kept_outputs, inputs, kept_grad_outputs,
              {.retain_graph = retain_graph, .create_graph = create_graph, .allow_unused = true});
}

// _check_requires_grad's cases, each with PyTorch's strict-mode message.
enum class Checked { Outputs, GradInputs, Jacobian };

void check_requires_grad(const std::vector<Tensor>& tensors, Checked kind, bool strict, const char* op) {
  if (!strict) return;
  for (size_t i = 0; i < tensors.size(); ++i) {
    check(tensors[i].defined(), op, "the output of the user-provided function is independent of input ", i,
          "; this is not allowed in strict mode");
    if (tensors[i].requires_grad()) continue;
    switch (kind) {
      case Checked::Outputs:
        check(false, op, "output ", i, " of the user-provided function does not require grad; in strict mode the "
              "outputs must be computed in a differentiable manner from the inputs");
        break;
      case Checked::GradInputs:
        check(false, op, "the gradient with respect to input ", i, " is independent of the inputs of the "
              "user-provided function; this is not allowed in strict mode");
        break;
      case Checked::Jacobian:
        check(false, op, "while computing the hessian, found that the jacobian of the user-provided function with "
              "respect to input ", i, " is independent of the input; this is not allowed in strict mode (the "
              "function must be twice differentiable and its jacobian depend on the inputs, which a linear "
              "function's does not)");
        break;
    }
  }
}

// _fill_in_zeros: an undefined gradient becomes zeros of its reference's shape (strict: an error
// saying which input, worded per stage).
enum class Stage { Back, BackTrick, DoubleBack, DoubleBackTrick };

std::vector<Tensor> fill_in_zeros(std::vector<Tensor> grads, const std::vector<Tensor>& refs, bool strict,
                                  bool create_graph, Stage stage, const char* op) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      if (strict) {
        switch (stage) {
          case Stage::Back:
            check(false, op, "the output of the user-provided function is independent of input ", i,
                  "; this is not allowed in strict mode");
            break;
          case Stage::BackTrick:
            check(false, op, "the gradient with respect to the input is independent of entry ", i,
                  " in the grad_outputs when using the double backward trick to compute forward mode gradients; "
                  "this is not allowed in strict mode");
            break;
          case Stage::DoubleBack:
            check(false, op, "the jacobian of the user-provided function is independent of input ", i,
                  "; this is not allowed in strict mode");
            break;
          case Stage::DoubleBackTrick:
            check(false, op, "the hessian of the user-provided function is independent of entry ", i,
                  " in the grad_jacobian; this is not allowed in strict mode as it prevents from using the double "
                  "backward trick to replace forward mode AD");
            break;
        }
      }
      grads[i] = zeros_like(refs[i]);
    } else if (strict && create_graph && !grads[i].requires_grad()) {
      const bool second = stage == Stage::DoubleBack || stage == Stage::DoubleBackTrick;
      check(false, op, "the ", second ? "hessian" : "jacobian", " of the user-provided function is independent of input ",
            i, "; this is not allowed in strict mode when create_graph=true");
    }
  }
  return grads;
}

// The tensors of `v` prepared as torch prepares them (no graph of their own).
std::vector<Tensor> prepare_v(const std::vector<Tensor>& v, const std::vector<Tensor>& refs, bool create_graph,
                              const char* op, const char* what) {
  std::vector<Tensor> prepared = preprocess(v, create_graph, /*need_graph=*/false, op, "v");
  validate_v(prepared, refs, op, what);
  return prepared;
}

// v may be omitted only for one input of one element (then v = 1).
void check_v_omittable(const std::vector<Tensor>& inputs, const char* op) {
  if (inputs.size() == 1)
    check(inputs[0].numel() == 1, op, "v can only be omitted when the function has a single input with a single "
          "element, got an input of shape ", inputs[0].shape());
  else
    check(false, op, "v can only be omitted when the function has a single input with a single element, got ",
          inputs.size(), " inputs");
}

// Zeros of `like`'s shape and dtype that require grad: the u of the double-vjp tricks, whose
// value never matters (the products are linear in it) but must be finite.
std::vector<Tensor> dummy_grad_outputs(const std::vector<Tensor>& like) {
  std::vector<Tensor> result;
  for (const Tensor& t : like) result.push_back(zeros_like(t).requires_grad_());
  return result;
}

// f's output checked for hvp, vhp and hessian: one element.
void check_single_element(const Tensor& out, const char* op) {
  check(out.numel() == 1, op, "the function must return a tensor with a single element, got shape ", out.shape());
}

// vhp and hvp share everything up to the first gradient (the jacobian, recorded).
struct FirstGradient {
  std::vector<Tensor> x;    // the prepared inputs
  std::vector<Tensor> v;    // the prepared v, or empty for v = 1
  Tensor out;               // f(x), one element
  std::vector<Tensor> jac;  // ∂f/∂x, recorded (create_graph)
};

FirstGradient first_gradient(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
                             const FunctionalOptions& options, const char* op) {
  require_grad_mode(op);
  FirstGradient r;
  r.x = preprocess(inputs, options.create_graph, /*need_graph=*/true, op, "input");
  if (!v.empty())
    r.v = prepare_v(v, r.x, options.create_graph, op, "input");
  else
    check_v_omittable(r.x, op);
  r.out = call(f, r.x, op);
  check_requires_grad({r.out}, Checked::Outputs, options.strict, op);
  check_single_element(r.out, op);
  r.jac = grad_of({r.out}, r.x, {}, /*create_graph=*/true, op);
  check_requires_grad(r.jac, Checked::Jacobian, options.strict, op);
  return r;
}

}  // namespace

OutputAndProducts vjp(const Function& f, const std::vector<Tensor>& inputs, const Tensor& v,
                      const FunctionalOptions& options) {
  const char* op = "autograd::functional::vjp";
  require_grad_mode(op);
  const std::vector<Tensor> x = preprocess(inputs, options.create_graph, /*need_graph=*/true, op, "input");
  const Tensor out = call(f, x, op);
  check_requires_grad({out}, Checked::Outputs, options.strict, op);
  std::vector<Tensor> grad_outputs;
  if (v.defined())
    grad_outputs = prepare_v({v}, {out}, options.create_graph, op, "output");
  else
    check(out.numel() == 1, op, "v can only be omitted when the function returns a single element, got shape ",
          out.shape());
  std::vector<Tensor> products = grad_of({out}, x, grad_outputs, options.create_graph, op);
  products = fill_in_zeros(std::move(products), x, options.strict, options.create_graph, Stage::Back, op);
  return {postprocess(out, options.create_graph), postprocess(std::move(products), options.create_graph)};
}

std::pair<Tensor, Tensor> jvp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
                              const FunctionalOptions& options) {
  const char* op = "autograd::functional::jvp";
  require_grad_mode(op);
  const std::vector<Tensor> x = preprocess(inputs, options.create_graph, /*need_graph=*/true, op, "input");
  std::vector<Tensor> directions;
  if (!v.empty())
    directions = prepare_v(v, x, options.create_graph, op, "input");
  else
    check_v_omittable(x, op);
  const Tensor out = call(f, x, op);
  check_requires_grad({out}, Checked::Outputs, options.strict, op);
  // Jᵀu, recorded: linear in u, so its vjp with v (over u) is Jv whatever u's value.
  const std::vector<Tensor> u = dummy_grad_outputs({out});
  const std::vector<Tensor> grad_inputs = grad_of({out}, x, u, /*create_graph=*/true, op);
  check_requires_grad(grad_inputs, Checked::GradInputs, options.strict, op);
  std::vector<Tensor> product = grad_of(grad_inputs, u, directions, options.create_graph, op);
  product = fill_in_zeros(std::move(product), {out}, options.strict, options.create_graph, Stage::BackTrick, op);
  return {postprocess(out, options.create_graph), postprocess(product[0], options.create_graph)};
}

OutputAndProducts vhp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
                      const FunctionalOptions& options) {
  const char* op = "autograd::functional::vhp";
  FirstGradient r = first_gradient(f, inputs, v, options, op);
  std::vector<Tensor> products = grad_of(r.jac, r.x, r.v, options.create_graph, op);
  products = fill_in_zeros(std::move(products), r.x, options.strict, options.create_graph, Stage::DoubleBack, op);
  return {postprocess(r.out, options.create_graph), postprocess(std::move(products), options.create_graph)};
}

OutputAndProducts hvp(const Function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
                      const FunctionalOptions& options) {
  const char* op = "autograd::functional::hvp";
  FirstGradient r = first_gradient(f, inputs, v, options, op);
  // Hᵀw, recorded: linear in w, so its vjp with v (over w) is Hv.
  const std::vector<Tensor> w = dummy_grad_outputs(r.x);
  const std::vector<Tensor> double_back = grad_of(r.jac, r.x, w, /*create_graph=*/true, op);
  std::vector<Tensor> products = grad_of(double_back, w, r.v, options.create_graph, op);
  products = fill_in_zeros(std::move(products), r.x, options.strict, options.create_graph, Stage::DoubleBackTrick, op);
  return {postprocess(r.out, options.create_graph), postprocess(std::move(products), options.create_graph)};
}

namespace {

// Zeros of out's shape with a 1 at flat index r: the grad_output that selects out[r].
Tensor one_hot(const Tensor& out, int64_t r) {
  Tensor selector = zeros({out.numel()}, out.dtype());
  selector.index_put_({r}, 1.0);  // in out's dtype, whichever float dtype it is
  return selector.reshape(out.shape());
}

// The reverse-mode jacobian behind both jacobian overloads and hessian; `op` names the caller.
std::vector<std::vector<Tensor>> jacobian_impl(const MultiOutputFunction& f, const std::vector<Tensor>& inputs,
                                               const FunctionalOptions& options, const char* op) {
  require_grad_mode(op);
  const std::vector<Tensor> x = preprocess(inputs, options.create_graph, /*need_graph=*/true, op, "input");
  const std::vector<Tensor> outputs = f(x);
  for (size_t k = 0; k < outputs.size(); ++k)
    check(outputs[k].defined(), op, "the function returned an undefined tensor as output ", k);
  check_requires_grad(outputs, Checked::Outputs, options.strict, op);

  std::vector<std::vector<Tensor>> result;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& out = outputs[k];
    const int64_t rows = out.numel();
    // rows[i][r] = ∂out[r] / ∂x[i], one backward per output element r (one-hot grad_output).
    std::vector<std::vector<Tensor>> rows_of(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<Tensor> row(x.size());
      if (out.requires_grad()) row = grad_of({out}, x, {one_hot(out, r)}, options.create_graph, op, /*retain_graph=*/true);
      for (size_t i = 0; i < x.size(); ++i) {
        if (row[i].defined()) {
          check(!(options.strict && options.create_graph && !row[i].requires_grad()), op,
                "the jacobian of the user-provided function is independent of input ", i,
                "; this is not allowed in strict mode when create_graph=true");
          rows_of[i].push_back(row[i]);
        } else {
          check(!options.strict, op, "output ", k, " of the user-provided function is independent of input ", i,
                "; this is not allowed in strict mode");
          rows_of[i].push_back(zeros_like(x[i]));
        }
      }
    }
    std::vector<Tensor> per_input;
    for (size_t i = 0; i < x.size(); ++i) {
      Shape shape = out.shape();
      shape.insert(shape.end(), x[i].shape().begin(), x[i].shape().end());
      per_input.push_back(rows == 0 ? zeros(shape, x[i].dtype()) : stack(rows_of[i], 0).reshape(shape));
    }
    result.push_back(postprocess(std::move(per_input), options.create_graph));
  }
  return result;
}

}  // namespace

std::vector<std::vector<Tensor>> jacobian(const MultiOutputFunction& f, const std::vector<Tensor>& inputs,
                                          const FunctionalOptions& options) {
  return jacobian_impl(f, inputs, options, "autograd::functional::jacobian");
}

std::vector<Tensor> jacobian(const Function& f, const std::vector<Tensor>& inputs, const FunctionalOptions& options) {
  const char* op = "autograd::functional::jacobian";
  const MultiOutputFunction single = [&f, op](const std::vector<Tensor>& x) { return std::vector<Tensor>{call(f, x, op)}; };
  return jacobian_impl(single, inputs, options, op).at(0);
}

std::vector<std::vector<Tensor>> hessian(const Function& f, const std::vector<Tensor>& inputs,
                                         const FunctionalOptions& options) {
  const char* op = "autograd::functional::hessian";
  // The jacobian of the jacobian: the inner one recorded, on the outer one's inputs, of f's single
  // element as a 0-d tensor (so that the inner jacobian has each input's shape).
  const MultiOutputFunction scalar_f = [&](const std::vector<Tensor>& x) {
    const Tensor out = call(f, x, op);
    check_requires_grad({out}, Checked::Outputs, options.strict, op);
    check_single_element(out, op);
    return std::vector<Tensor>{out.reshape({})};
  };
  const MultiOutputFunction jac_f = [&](const std::vector<Tensor>& x) {
    std::vector<Tensor> jac = jacobian_impl(scalar_f, x, {.create_graph = true, .strict = false}, op).at(0);
    check_requires_grad(jac, Checked::Jacobian, options.strict, op);
    return jac;
  };
  return jacobian_impl(jac_f, inputs, options, op);
}

}  // namespace tg::autograd::functional
