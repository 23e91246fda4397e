#include <vector>

#include "rows.hpp"
#include "tapegrad/data/data_loader.hpp"

namespace tg::data {

Example collate(const std::vector<Example>& samples) {
  std::vector<Tensor> data, targets;
  data.reserve(samples.size());
  targets.reserve(samples.size());
  for (const Example& sample : samples) {
    data.push_back(sample.data);
    targets.push_back(sample.target);
  }
  return {detail::stack_rows(data, "collate", "data"), detail::stack_rows(targets, "collate", "target")};
}

}  // namespace tg::data
