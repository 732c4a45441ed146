// libFuzzer entry point: ParseSafetensorsHeader on arbitrary bytes.
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gemma::fuzz::FuzzSafetensorsHeader(data, size);
  return 0;
}
