// Turning options that are fixed for a whole update into template flags, so that an optimizer's
// loop carries no branch for them and vectorises. Private to optim.
#pragma once

namespace tg::optim::kernel_flags {

// Calls fn.template operator()<flags...>() with each runtime bool as a template argument:
//   with_flags([&]<bool kL2, bool kAmsgrad>() { ... }, l2, amsgrad);
template <bool... kFlags, typename Fn>
void with_flags(const Fn& fn) {
  fn.template operator()<kFlags...>();
}

template <bool... kFlags, typename Fn, typename... Rest>
void with_flags(const Fn& fn, bool flag, Rest... rest) {
  if (flag)
    with_flags<kFlags..., true>(fn, rest...);
  else
    with_flags<kFlags..., false>(fn, rest...);
}

}  // namespace tg::optim::kernel_flags
