#include <catch2/catch.hpp>

#include "support/fixtures.hpp"

// The seeds compute LayerNorm over the last two dims from primitive ops.
TEST_CASE("composed LayerNorm over two dims reproduces the seed notebook", "[core][seed]") {
  const tg::Tensor x = tg::tensor({0.2, 0.1, 0.3, 0.5, 0.1, 0.1}, {2, 1, 3});
  const tg::Tensor y = (x - x.mean({-1, -2}, true)) / (x.var({-1, -2}, false, true) + 1e-5).sqrt();
  const tg::Tensor expected = tg::tensor({0.0, -1.2238, 1.2238, 1.4140, -0.7070, -0.7070}, {2, 1, 3});
  TG_REQUIRE_CLOSE(y, expected, 1e-4);
}
