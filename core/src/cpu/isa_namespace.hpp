// TG_ISA_HELPERS: the namespace of helper templates that kernels inline (simd_lanes.hpp,
// deterministic_sum.hpp). A kernel source compiled once per vector level (tg_add_isa_kernels
// defines TG_ISA = v2, v3 or avx512) gets its own copy of every helper: an inline function with
// one name in all of them would be merged by the linker into one copy, compiled for one level,
// and AVX-512 code could then run on a CPU without it. Sources compiled once get `baseline`.
#pragma once

#ifndef TG_ISA
#define TG_ISA baseline
#endif

#define TG_ISA_CONCAT_(a, b) a##b
#define TG_ISA_CONCAT(a, b) TG_ISA_CONCAT_(a, b)
#define TG_ISA_HELPERS TG_ISA_CONCAT(helpers_, TG_ISA)
