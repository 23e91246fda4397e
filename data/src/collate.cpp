#include <vector>

#include "tapegrad/data/data_loader.hpp"

namespace tg::data {

namespace {

// Validated here rather than left to tg::stack, so that the message names the sample and the
// part (data or target) that differs.
void check_alike(const std::vector<Tensor>& parts, const char* what) {
  const Tensor& first = parts.front();
  for (size_t i = 0; i < parts.size(); ++i) {
    check(parts[i].defined(), "collate", "the ", what, " of sample ", i, " is undefined");
    check(parts[i].shape() == first.shape() && parts[i].dtype() == first.dtype(), "collate", "every sample's ", what,
          " must have one shape and dtype: sample 0 has ", first.shape(), " ", first.dtype(), ", sample ", i, " has ",
          parts[i].shape(), " ", parts[i].dtype());
  }
}

}  // namespace

Example collate(const std::vector<Example>& samples) {
  check(!samples.empty(), "collate", "no samples to stack");
  std::vector<Tensor> data, targets;
  data.reserve(samples.size());
  targets.reserve(samples.size());
  for (const Example& sample : samples) {
    data.push_back(sample.data);
    targets.push_back(sample.target);
  }
  check_alike(data, "data");
  check_alike(targets, "target");
  return {stack(data), stack(targets)};
}

}  // namespace tg::data
