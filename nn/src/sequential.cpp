// Sequential: children applied in order, named by their position.
#include "tapegrad/nn/sequential.hpp"

namespace tg::nn {

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Module& child : *this) h = child(h);
  return h;
}

}  // namespace tg::nn
