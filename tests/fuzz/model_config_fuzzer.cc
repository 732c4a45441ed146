// libFuzzer entry point: ParseModelConfig on arbitrary text.
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gemma::fuzz::FuzzModelConfig(data, size);
  return 0;
}
