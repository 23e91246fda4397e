// Memory stays flat: 100,000 training steps, and 100,000 forward passes without backward (inside
// and outside NoGradGuard), leave the tape's live node count at its baseline after every step and
// do not grow resident memory.
#include <fstream>
#include <unistd.h>

#include "core_test_util.hpp"

using tg::Tensor;

namespace {

constexpr int kSteps = 100000;
constexpr int kWarmup = 1000;
constexpr int64_t kAllowedGrowth = 8 << 20;  // bytes of resident memory between warm-up and the end

// Resident set size in bytes (second field of /proc/self/statm, in pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  REQUIRE(statm);
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Under AddressSanitizer, freed blocks wait in its quarantine (256 MiB by default) before reuse,
// so resident memory measures ASan rather than tapegrad. That build runs LeakSanitizer at exit and
// still checks the live node count; the plain build checks resident memory.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kResidentMemoryIsTapegrads = false;
#else
constexpr bool kResidentMemoryIsTapegrads = true;
#endif

struct Problem {
  Tensor x = tg::randn({16, 8});
  Tensor target = tg::randn({16, 8});
  Tensor w = tg::randn({8, 8}).requires_grad_();
  Tensor b = tg::zeros({8}).requires_grad_();

  Tensor loss() const { return ((tg::matmul(x, w) + b).relu() - target).pow(2).mean(); }
};

// Runs `step` kSteps times; the live node count must equal `baseline` after every step, and RSS
// must not grow by more than kAllowedGrowth after warm-up.
template <typename Step>
void run_flat(const Step& step) {
  const int64_t baseline = tg::autograd::live_nodes();
  int64_t resident_after_warmup = 0;
  int64_t steps_with_leftover_nodes = 0;
  for (int i = 0; i < kSteps; ++i) {
    step();
    if (tg::autograd::live_nodes() != baseline) ++steps_with_leftover_nodes;
    if (i + 1 == kWarmup) resident_after_warmup = resident_bytes();
  }
  CHECK(steps_with_leftover_nodes == 0);
  CHECK(tg::autograd::live_nodes() == baseline);
  const int64_t growth = resident_bytes() - resident_after_warmup;
  INFO("resident memory grew by " << growth << " bytes");
  if (kResidentMemoryIsTapegrads) CHECK(growth <= kAllowedGrowth);
}

}  // namespace

TEST_CASE("memory: 100,000 training steps keep the tape and RSS flat", "[core][memory]") {
  tg::manual_seed(61);
  Problem p;
  const double initial_loss = p.loss().item();
  run_flat([&] {
    const Tensor loss = p.loss();
    loss.backward();
    tg::NoGradGuard no_grad;
    for (Tensor* param : {&p.w, &p.b}) {
      float* value = param->mutable_data<float>();
      const float* grad = param->grad().data<float>();
      for (int64_t i = 0; i < param->numel(); ++i) value[i] -= 0.01f * grad[i];
      param->set_grad(Tensor());
    }
  });
  // The steps really trained something: the loss went down.
  CHECK(p.loss().item() < initial_loss);
}

TEST_CASE("memory: 100,000 forward passes without backward keep the tape and RSS flat", "[core][memory]") {
  tg::manual_seed(62);
  const Problem p;
  SECTION("grad mode on") {
    run_flat([&] {
      const Tensor loss = p.loss();
      REQUIRE(loss.requires_grad());
    });
  }
  SECTION("inside NoGradGuard") {
    run_flat([&] {
      tg::NoGradGuard no_grad;
      const Tensor loss = p.loss();
      REQUIRE_FALSE(loss.requires_grad());
    });
  }
}
