// libFuzzer target: any byte string given to the .npy reader either loads or throws tg::Error.
// Never a crash, a sanitizer report, or an allocation larger than the input can justify.
#include <cstddef>
#include <cstdint>
#include <string>
#include <tapegrad/tapegrad.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tg::Tensor t = tg::decode_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // What loads must survive a round trip unchanged.
    if (tg::encode_npy(t).size() < static_cast<size_t>(t.numel())) __builtin_trap();
  } catch (const tg::Error&) {
  }
  return 0;
}
