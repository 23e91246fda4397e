// What the distributed tests share: Catch2, tapegrad with tg::dist, and the fixture helpers (REQUIRE_TG_ERROR, values).
#pragma once

#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

#include "support/fixtures.hpp"
