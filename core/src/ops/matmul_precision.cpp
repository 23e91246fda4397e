// tg::set_float32_matmul_precision: one process-wide setting, as torch's.
#include "ops/matmul_precision.hpp"

#include <atomic>

#include "tapegrad/error.hpp"
#include "tapegrad/matmul_precision.hpp"

namespace tg {

namespace {

std::atomic<detail::MatmulPrecision> precision{detail::MatmulPrecision::highest};

constexpr std::pair<std::string_view, detail::MatmulPrecision> kNames[] = {
    {"highest", detail::MatmulPrecision::highest},
    {"high", detail::MatmulPrecision::high},
    {"medium", detail::MatmulPrecision::medium}};

}  // namespace

void set_float32_matmul_precision(std::string_view name) {
  for (const auto& [known, value] : kNames)
    if (name == known) {
      precision.store(value, std::memory_order_relaxed);
      return;
    }
  throw Error(detail::concat("set_float32_matmul_precision: unknown precision '", name,
                             "' (expected \"highest\", \"high\" or \"medium\")"));
}

std::string get_float32_matmul_precision() {
  const detail::MatmulPrecision now = precision.load(std::memory_order_relaxed);
  for (const auto& [known, value] : kNames)
    if (value == now) return std::string(known);
  return "highest";
}

namespace detail {

MatmulPrecision float32_matmul_precision() { return precision.load(std::memory_order_relaxed); }

namespace {
thread_local Bf16Products products_forced = Bf16Products::off;
}  // namespace

Bf16Products forced_bf16_products() { return products_forced; }

ForceBf16Products::ForceBf16Products(Bf16Products mode) : before_(products_forced) { products_forced = mode; }
ForceBf16Products::~ForceBf16Products() { products_forced = before_; }

}  // namespace detail

}  // namespace tg
